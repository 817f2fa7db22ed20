"""A job's life beyond one run: what it waits for, arrays, and what other parts of issue-sized features add."""
