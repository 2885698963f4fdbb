"""Loading: ``load(name_or_path)`` for every model (shipped checkpoints, MiniLM, Hugging Face
ids and folders), under the deployment ``policy``, sized and placed by ``footprint`` before the
weights load (``hf``), and returned wrapped in the GPU-OOM ``resilience`` guard. It picks a
backend; it never captures or draws anything."""
