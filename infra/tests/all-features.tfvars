# Every optional part of the module switched on, so that checkov (test_tools.py) checks every
# resource: checkov skips the checks of a resource whose count it evaluates to 0.
bucket_name           = "example-segment-lake"
glue_databases        = ["web", "ios"]
emr_subnet_id         = "subnet-0123456789abcdef0"
create_emr_cluster    = true
create_emr_serverless = true
enable_lakeformation  = true
enable_access_logging = true
