# The sources' databases and the reports database. The sync creates missing tables and
# partitions in them; the IAM policies (iam.tf) allow these databases and no others.

resource "aws_glue_catalog_database" "lake" {
  for_each = var.create_glue_databases ? toset(local.glue_database_names) : toset([])

  name        = each.value
  description = each.value == var.reports_database ? "Sync reports of the Segment data lake ${var.name}" : "Segment data lake ${var.name}: tables of the sources using database ${each.value}"
  tags        = local.tags
}
