"""The compile step: AOTInductor's release compile, its targets and toolchain, and what is read off the compiled package (constant names and digests, native input bounds)."""
