/* placeholder: written by the storage work (issue 2). */
