import os

from celery import Celery

from backstop.celery import BackstopTask

REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379")
app = Celery("tasks", broker=f"{REDIS}/0", backend=f"{REDIS}/1")
app.conf.backstop_redis_url = f"{REDIS}/2"  # the shared breaker and window state
app.conf.task_acks_late = True


class Task(BackstopTask):
    # A partial configuration over the defaults (durations in ns): the first
    # transport retry after 1 s, the identical-failure breaker at 3.
    backstop_config = {"transport": {"initial_delay": 1_000_000_000}}


@app.task(base=Task, bind=True)
def build(self, work_item):
    raise AssertionError("tests failed: 3 of 40")
