# timer_skew_p50_ms (./faast bench runtime): each run records when it started beside the occurrence it runs for (the
# schedule status's Next, which useMonitor hands to the run it schedules).
import datetime
import json

import azure.functions as func


def main(timer: func.TimerRequest, out: func.Out[str]) -> None:
    started = datetime.datetime.now(datetime.timezone.utc).isoformat()
    out.set(json.dumps({"scheduled": (timer.schedule_status or {}).get("Next"), "started": started, "past_due": timer.past_due}))
