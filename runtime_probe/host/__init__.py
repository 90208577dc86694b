"""Host checks: does this machine have what the package was built for? ``rules`` holds the rules
(device, GPU arch, driver, torch, libstdc++/glibc, free memory); ``cpu`` the CPU ISA features.
"""
