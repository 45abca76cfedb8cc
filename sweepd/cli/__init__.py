"""The command line: argument parsing, client verbs, views, the live view."""
