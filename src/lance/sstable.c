/* placeholder: written by the sstable codec work (issue 3). */
