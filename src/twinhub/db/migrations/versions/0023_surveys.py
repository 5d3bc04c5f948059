"""surveys over USSD: a programme's survey (its seed, target and frame), the households
its sample drew, and their answers with the USSD session that gave each

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "surveys",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("project_did", sa.String(200), nullable=False),
        sa.Column("seed", sa.String(64), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("target_precision", sa.Float(), nullable=False),
        sa.Column("expected_cv", sa.Float(), nullable=False),
        sa.Column("planned_size", sa.Integer(), nullable=True),
        sa.Column("household_min", sa.Integer(), nullable=False),
        sa.Column("household_max", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("frame_size", sa.Integer(), nullable=True),
        sa.Column("frame_digest", sa.String(71), nullable=True),
        sa.Column("sample_size", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("drawn_by", sa.String(200), nullable=True),
        sa.Column("drawn_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_surveys")),
    )
    op.create_index(op.f("ix_surveys_project_did"), "surveys", ["project_did"])
    op.create_table(
        "survey_households",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("survey_id", sa.String(32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("stove_did", sa.String(200), nullable=False),
        sa.Column("customer_id", sa.String(16), nullable=False),
        sa.Column("recorded_household_size", sa.Integer(), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["survey_id"], ["surveys.id"], name=op.f("fk_survey_households_survey_id_surveys")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_survey_households")),
        sa.UniqueConstraint("survey_id", "stove_did", name=op.f("uq_survey_households_survey_id")),
    )
    op.create_index(op.f("ix_survey_households_customer_id"), "survey_households", ["customer_id"])
    op.create_table(
        "survey_answers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("survey_id", sa.String(32), nullable=False),
        sa.Column("stove_did", sa.String(200), nullable=False),
        sa.Column("question", sa.String(32), nullable=False),
        sa.Column("value", sa.String(32), nullable=False),
        sa.Column("session_id", sa.String(100), nullable=False),
        sa.Column("phone_number", sa.String(16), nullable=False),
        sa.Column("language", sa.String(16), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["survey_id"], ["surveys.id"], name=op.f("fk_survey_answers_survey_id_surveys")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_survey_answers")),
        sa.UniqueConstraint(
            "survey_id", "stove_did", "question", name=op.f("uq_survey_answers_survey_id")
        ),
    )


def downgrade() -> None:
    op.drop_table("survey_answers")
    op.drop_index(op.f("ix_survey_households_customer_id"), table_name="survey_households")
    op.drop_table("survey_households")
    op.drop_index(op.f("ix_surveys_project_did"), table_name="surveys")
    op.drop_table("surveys")
