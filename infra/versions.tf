terraform {
  # 1.9: a variable's validation may refer to another variable (emr_subnet_id checks
  # create_emr_cluster). The offline tests (infra/tests/*.tftest.hcl) need 1.7 for mocks.
  required_version = ">= 1.9.0"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 5.x and 6.x both work: the module uses no argument that one of them lacks
      # (data.aws_region's `id`, not `name`/`region`, for the same reason).
      version = ">= 5.40, < 7.0"
    }
  }
}
