"""`events.read.statements.orm_sql`: a hot read's SQL kept once, run with the caller's values."""

from __future__ import annotations

import pytest
from django.db import connection

from events.models import Stage
from events.read.statements import orm_sql


@pytest.mark.django_db
def test_the_kept_sql_answers_what_the_orm_answers_for_other_values():
    query = Stage.objects.filter(pk=0).order_by().values_list("pk", "name")
    sql = orm_sql(query, [0])
    stage = Stage.objects.order_by("pk").first()
    with connection.cursor() as cursor:
        cursor.execute(sql, [stage.pk])
        assert cursor.fetchall() == list(
            Stage.objects.filter(pk=stage.pk).values_list("pk", "name")
        )


def test_a_query_whose_parameters_are_not_the_probe_is_refused():
    query = Stage.objects.filter(pk=0, sequence=5).values_list("pk")
    with pytest.raises(AssertionError, match="takes"):
        orm_sql(query, [0])
