/* placeholder: written by the pk_index codec work (issue 3). */
