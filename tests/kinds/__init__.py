"""One test file per kind: tests/kinds/test_<kind>.py."""
