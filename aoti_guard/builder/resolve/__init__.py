"""The resolve step: a TARGET (or the bundled example) turned into a BuildSpec on its device, with the --dynamic dims and saved programs read."""
