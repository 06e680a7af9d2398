"""The two minutely django-q2 schedules of ops: the cluster's heartbeat and the
queueing of due notification deliveries (retries, and rows a dead worker left)."""

from django.db import migrations
from django.utils import timezone

SCHEDULES = [
    ("clawboo.qcluster-beat", "core.beats.beat_qcluster"),
    ("clawboo.notify-send-due", "ops.notify.send_due"),
]


def add(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for name, func in SCHEDULES:
        Schedule.objects.get_or_create(
            name=name,
            defaults={
                "func": func,
                "schedule_type": "I",  # MINUTES
                "minutes": 1,
                "repeats": -1,
                "next_run": timezone.now(),
            },
        )


def remove(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.filter(name__in=[name for name, _ in SCHEDULES]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(add, remove)]
