/* placeholder: written by the deletion codec work (issue 3). */
