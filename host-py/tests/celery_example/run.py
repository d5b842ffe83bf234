from tasks import build

for _ in range(4):
    try:
        build.delay(work_item="pr-1234").get(timeout=30)
    except Exception as e:  # BackstopTerminal, or BackstopBlocked
        print(type(e).__name__, e.record["action"], "-", e)
