"""A real serving engine on this machine: a vLLM server launcher, the engine's own config, and
the fidelity loop (profile -> step model -> simulate -> replay -> compare), on the tiny-model
fixture (:mod:`omniplane.fixture`). Imports no vLLM, torch or Ray at module level: the fixture
builder imports torch and transformers when it builds, the server runs vLLM in a subprocess.
See docs/guides/check-your-engine.md.
"""
