"""The optimization loop: one candidate through the pipeline, the loop, its history, run directories, executors."""
