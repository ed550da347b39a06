"""The command line: the exercises command, the kinds' self-tests, the pins."""
