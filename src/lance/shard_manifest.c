/* placeholder: written by the shard_manifest codec work (issue 3). */
