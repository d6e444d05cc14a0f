"""The GPU: specs and presets, dispatch to dies, occupancy, measured SM layouts."""
