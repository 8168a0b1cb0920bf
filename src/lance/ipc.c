/* placeholder: written by the ipc codec work (issue 3). */
