"""prebake: build prebaked vLLM serving images, one per GPU host family."""
