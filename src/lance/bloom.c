/* placeholder: written by the bloom codec work (issue 3). */
