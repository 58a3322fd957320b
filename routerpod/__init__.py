"""The router pod's program (router.py), a room of its own: it runs alone in the router pod's image
(templates/router.Dockerfile.j2 copies router.py to /opt/prebake/router.py), and the bridge never imports it.
The one header it shares with the pods is entrypoint/contract.py's; router.py keeps a copy that
tests/unit/test_boundaries.py checks equal."""
