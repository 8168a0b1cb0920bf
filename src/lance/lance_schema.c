/* placeholder: written by the lance_schema codec work (issue 3). */
