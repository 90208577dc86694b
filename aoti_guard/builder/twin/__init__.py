"""The debug_twin step: the release program compiled again with AOTI's value printer, scheduled where it costs the build least."""
