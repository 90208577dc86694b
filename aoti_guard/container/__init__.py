"""``aoti-guard probe --image``: the probe inside a container of the serving image (``probe``), the one
place that talks to Docker (``docker_run``), and the first code run inside the container (``boot``).
"""
