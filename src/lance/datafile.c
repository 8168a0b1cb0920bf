/* placeholder: written by the datafile codec work (issue 3). */
