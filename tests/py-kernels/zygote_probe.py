"""Run by tests/torch-zygote.test.ts through `python -m nlc_zygote zygote_probe MODE`: says whether
torch was imported before it ran, echoes one line of stdin, then ends as MODE asks."""
import json
import os
import sys
import time

print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "torch_preloaded": "torch" in sys.modules, "cwd": os.getcwd(),
                  "argv": sys.argv[1:], "env": os.environ.get("NLC_ZYGOTE_PROBE")}), flush=True)
print(f"echo {sys.stdin.readline().strip()}", flush=True)
mode = sys.argv[1] if len(sys.argv) > 1 else ""
if mode == "exit3":
    sys.stderr.write("about to exit with 3\n")
    sys.exit(3)
if mode == "abort":
    os.abort()
if mode == "hang":
    time.sleep(1000)
