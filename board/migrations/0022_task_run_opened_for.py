from django.db import migrations, models
from django.db.models import Exists, F, OuterRef


def mark_runs_in_flight(apps, schema_editor):
    """A claim whose run is running now had its run: mark it, so that run's end does
    not let the claim open another. Any other claim stays as it was (due)."""
    Task = apps.get_model("board", "Task")
    ExecutionProcess = apps.get_model("board", "ExecutionProcess")
    running = ExecutionProcess.objects.filter(
        task_id=OuterRef("pk"), attempt=OuterRef("attempts"), status="running"
    )
    Task.objects.filter(Exists(running)).update(run_opened_for=F("attempts"))


class Migration(migrations.Migration):
    dependencies = [
        ("board", "0021_claim_route_lookups"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="run_opened_for",
            field=models.IntegerField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(mark_runs_in_flight, migrations.RunPython.noop),
    ]
