/* placeholder: written by the dataset_manifest codec work (issue 3). */
