from django.db import migrations


def create_default_team(apps, schema_editor):
    Team = apps.get_model("clawboo", "Team")
    Team.objects.get_or_create(pk="default", defaults={"name": "Default team"})


class Migration(migrations.Migration):
    dependencies = [("clawboo", "0001_initial")]

    operations = [migrations.RunPython(create_default_team, migrations.RunPython.noop)]
