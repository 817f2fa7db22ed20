from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0027_job_deadline'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='first_forecast',
            field=models.JSONField(blank=True, help_text='The forecast\'s first answer, before calibration: {"asked": t, "earliest": t, "latest": t or null} (epoch seconds)', null=True),
        ),
    ]
