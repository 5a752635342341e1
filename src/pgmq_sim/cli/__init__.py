"""The command line: the only part that draws, prints and exits."""
