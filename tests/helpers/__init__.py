"""What several test modules share: recorded agents, scripted policies, generated traces,
schema validators. A test module imports from here (or uses conftest's fixtures), never from
another test module (tests/test_test_habits.py checks it)."""
