"""The zoo: public architectures from torchvision, timm and transformers, built from their configs.

Not shipped in the wheel. ``zoo.models`` holds the registry (and one TARGET function per model),
``zoo.bare`` the bare ``torch.export`` + ``aoti_compile_and_package`` runner. See ``zoo/README.md``.
"""
