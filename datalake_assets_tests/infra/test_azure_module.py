"""The Azure variant's Terraform module (infra/azure/), parsed: what it promises the lake.

checkov (no failed check, every skip with a reason) and `terraform fmt` cover it through
test_tools.py and test_module.py, which scan infra/ recursively. `terraform validate` needs the
azurerm, azuread and databricks providers, which the offline test machine does not have: what
was and was not proven is in infra/azure/README.md."""

from __future__ import annotations

import re

import pytest

from datalake_assets_tests.infra.terraform import AZURE, parse_module


@pytest.fixture(scope="module")
def azure():
    return parse_module(AZURE)


@pytest.mark.slow
def test_storage_is_adls_gen2_private_and_keyless(azure):
    account = azure["resource"]["azurerm_storage_account.lake"]
    # the hierarchical namespace is what lets the commit protocol rename an hour into place
    assert account["is_hns_enabled"] is True
    assert account["shared_access_key_enabled"] is False  # Azure AD only: no key to leak
    assert account["public_network_access_enabled"] is False
    assert account["allow_nested_items_to_be_public"] is False
    assert account["min_tls_version"] == "TLS1_2"
    assert account["network_rules"][0]["default_action"] == "Deny"
    assert "azurerm_storage_account_customer_managed_key.lake" in azure["resource"]


def test_lifecycle_expires_only_transient_prefixes(azure):
    policy = azure["resource"]["azurerm_storage_management_policy.lake"]
    prefixes = [p for rule in policy["rule"] for f in rule["filters"] for p in f["prefix_match"]]
    assert sorted(prefixes) == sorted(
        f"${{var.lake_container}}/${{local.{name}}}"
        for name in ("jobs_prefix", "pipes_prefix", "staging_prefix")
    )
    locals_ = azure["locals"]
    assert (locals_["jobs_prefix"], locals_["pipes_prefix"], locals_["staging_prefix"]) == (
        "_jobs/",
        "_pipes/",
        "lake/_staging/",
    )
    assert locals_["lake_root"].startswith("abfss://${var.lake_container}@")


def test_the_jobs_principal_gets_the_container_and_the_secrets_nothing_broader(azure):
    grants = {
        k: v
        for k, v in azure["resource"].items()
        if k.startswith("azurerm_role_assignment.")
        and "azuread_service_principal.lake" in str(v["principal_id"])
    }
    assert {(v["scope"], v["role_definition_name"]) for v in grants.values()} == {
        ("${azurerm_storage_container.lake.id}", "Storage Blob Data Contributor"),
        ("${azurerm_key_vault.lake.id}", "Key Vault Secrets User"),
    }


def test_metastore_database_is_latin1_with_tls_and_the_schema_made_up_front(azure):
    db = azure["resource"]["azurerm_mysql_flexible_database.metastore"]
    assert (db["charset"], db["collation"]) == ("latin1", "latin1_swedish_ci")
    tls = azure["resource"]["azurerm_mysql_flexible_server_configuration.require_tls"]
    assert (tls["name"], tls["value"]) == ("require_secure_transport", "ON")
    conf = azure["locals"]["sync_spark_conf"]
    assert conf["spark.hadoop.datanucleus.schema.autoCreateAll"] == "false"
    assert "useMysqlMetadata=true" in azure["locals"]["metastore_jdbc_url"]
    # secrets come from the Key Vault-backed scope, never inline
    assert conf["spark.hadoop.javax.jdo.option.ConnectionPassword"].startswith("{{secrets/")
    assert re.search(
        r"secret\.\$\{local\.dfs_host\}$", next(k for k in conf if "oauth2.client.secret" in k)
    )


def test_databricks_nodes_have_no_public_ip_and_the_policy_pins_the_runtime(azure):
    ws = azure["resource"]["azurerm_databricks_workspace.lake"]
    params = ws["custom_parameters"][0]
    assert params["no_public_ip"] is True
    assert params["virtual_network_id"] == "${azurerm_virtual_network.lake.id}"
    policy = azure["resource"]["databricks_cluster_policy.sync"]["definition"]
    assert "var.databricks_spark_version" in policy and "autotermination_minutes" in policy


def test_the_jobs_principal_submits_runs_only_under_the_sync_policy(azure):
    """[compute] backend = "databricks" authenticates as the jobs' principal: in the workspace
    it may use the sync policy and create no other cluster; the job's Python reads the lake as
    it, the secret from the Key Vault-backed scope."""
    sp = azure["resource"]["databricks_service_principal.jobs"]
    assert sp["application_id"] == "${azuread_application.lake.client_id}"
    assert sp["allow_cluster_create"] is False
    perms = azure["resource"]["databricks_permissions.sync_policy"]
    assert perms["cluster_policy_id"] == "${databricks_cluster_policy.sync.id}"
    (grant,) = perms["access_control"]
    assert grant["permission_level"] == "CAN_USE"
    env = azure["locals"]["sync_env_vars"]
    assert env["AZURE_CLIENT_SECRET"].startswith("{{secrets/")
    assert "spark_env_vars" in azure["resource"]["databricks_cluster_policy.sync"]["definition"]


def test_every_variable_and_output_is_described_and_in_the_readme(azure):
    readme = (AZURE / "README.md").read_text(encoding="utf-8")
    for kind in ("variable", "output"):
        assert azure[kind], kind
        for name, body in azure[kind].items():
            assert len(body.get("description", "")) >= 20, f"{kind} {name}"
            assert re.search(rf"^\|\s*`{name}`\s*\|", readme, re.MULTILINE), (
                f"{kind} {name} is missing from the tables of infra/azure/README.md"
            )


def test_every_taggable_resource_carries_the_lake_tag(azure):
    taggable = (
        "azurerm_resource_group",
        "azurerm_virtual_network",
        "azurerm_storage_account",
        "azurerm_key_vault",
        "azurerm_mysql_flexible_server",
        "azurerm_databricks_workspace",
        "azurerm_log_analytics_workspace",
        "azurerm_private_endpoint",
        "azurerm_network_security_group",
    )
    for key, body in azure["resource"].items():
        if key.split(".")[0] in taggable:
            assert "local.tags" in str(body.get("tags", "")), f"{key} is not tagged"
