/* placeholder: written by the route codec work (issue 3). */
