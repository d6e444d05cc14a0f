"""Does the simulator agree with the hardware? Measure remaps with real counters, simulate the same
remaps, compare. `measure` runs on a GPU (ncu); `compare` runs anywhere on a recorded measurement."""
