"""The executor: claimed board tasks worked by their agents' runtimes."""
