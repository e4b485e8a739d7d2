"""The GraphQL documents the Dagster 1.13 UI sends, as ``dagster_ui.py`` uses them.

Copied from the UI bundle's TypeScript (the source maps of
``dagster_webserver/webapp/build/_next/static/chunks/*.js``, under ``ui-core/src/``); each
document keeps the UI's operation name, arguments and field names, with fragments cut to the
fields a launch decision or an assertion reads. Where each one comes from is noted above it.
"""

# app/PythonErrorFragment.tsx
PYTHON_ERROR = """
fragment PythonErrorFragment on PythonError {
  message
  stack
  errorChain { isExplicitLink error { message stack } }
}"""

# LAUNCH_ASSET_EXECUTION_ASSET_NODE_FRAGMENT + LAUNCH_ASSET_LOADER_QUERY (fields kept: what
# stateForLaunchingAssets and getAssetCheckHandleInputs read), plus groupName / description
# (AssetNodeDefinitionFragment of the asset page) for the assertions.
LAUNCH_ASSET_LOADER_QUERY = """
query LaunchAssetLoaderQuery($assetKeys: [AssetKeyInput!]!) {
  assetNodes(assetKeys: $assetKeys) { id ...LaunchAssetExecutionAssetNodeFragment }
  assetNodeAdditionalRequiredKeys(assetKeys: $assetKeys) { path }
  assetNodeDefinitionCollisions(assetKeys: $assetKeys) { assetKey { path } }
}
fragment LaunchAssetExecutionAssetNodeFragment on AssetNode {
  id opNames jobNames graphName hasMaterializePermission
  partitionDefinition { type name description dimensionTypes { type name } }
  backfillPolicy { maxPartitionsPerRun description policyType }
  isObservable isExecutable isMaterializable
  assetKey { path }
  assetChecksOrError { ... on AssetChecks { checks { name canExecuteIndividually jobNames } } }
  dependencyKeys { path }
  repository { id name location { id name } }
  requiredResources { resourceKey }
  configField { name isRequired }
  groupName description
}"""

# Not a UI document: every asset node with the fields the asset page's definition shows
# (group, kind of asset, upstream keys, description, partitions), for the assertions.
ALL_ASSET_NODES_QUERY = """
query AssetNodesForTest {
  assetNodes { id assetKey { path } groupName isMaterializable isExecutable isObservable
    dependencyKeys { path } description partitionDefinition { type description } }
}"""

# AssetsCatalogTable.tsx: what the catalog lists (declared and undeclared keys alike).
ASSET_CATALOG_TABLE_QUERY = (
    """
query AssetCatalogTableQuery($cursor: String, $limit: Int!) {
  assetsOrError(cursor: $cursor, limit: $limit) {
    ... on AssetConnection { nodes { id key { path } definition { id groupName isExecutable } }
      cursor }
    ...PythonErrorFragment
  }
}"""
    + PYTHON_ERROR
)

# workspace/WorkspaceContext/WorkspaceQueries.tsx (CodeLocationStatusQuery), plus the load
# error of a location, as the workspace page shows it.
CODE_LOCATION_STATUS_QUERY = (
    """
query CodeLocationStatusQuery {
  locationStatusesOrError {
    ... on WorkspaceLocationStatusEntries { entries { id name loadStatus updateTimestamp } }
  }
  workspaceOrError {
    ... on Workspace { locationEntries { name loadStatus
      locationOrLoadError { __typename ... on RepositoryLocation { repositories { name } }
        ...PythonErrorFragment } } }
  }
}"""
    + PYTHON_ERROR
)

# launchpad/ConfigFetch.tsx: the partition's tags and config, fetched before a single run.
CONFIG_PARTITION_FOR_ASSET_JOB_QUERY = (
    """
query ConfigPartitionForAssetJobQuery($repositoryName: String!, $repositoryLocationName: String!,
    $jobName: String!, $partitionName: String!, $assetKeys: [AssetKeyInput!]!) {
  pipelineOrError(params: {pipelineName: $jobName, repositoryName: $repositoryName,
      repositoryLocationName: $repositoryLocationName}) {
    ... on Pipeline { id
      partition(partitionName: $partitionName, selectedAssetKeys: $assetKeys) { name
        runConfigOrError { ... on PartitionRunConfig { yaml } ...PythonErrorFragment }
        tagsOrError { ... on PartitionTags { results { key value } } ...PythonErrorFragment }
      }
    }
  }
}"""
    + PYTHON_ERROR
)

# instance/backfill/BackfillUtils.tsx (the partitions dialog's "Launch backfill").
LAUNCH_PARTITION_BACKFILL_MUTATION = (
    """
mutation LaunchPartitionBackfill($backfillParams: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $backfillParams) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PartitionSetNotFoundError { message }
    ... on PartitionKeysNotFoundError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { stepKey invalidOutputName }
    ... on UnauthorizedError { message }
    ... on PipelineNotFoundError { message }
    ... on RunConflict { message }
    ... on ConflictingExecutionParamsError { message }
    ... on PresetNotFoundError { message }
    ... on RunConfigValidationInvalid { pipelineName errors { message path reason } }
    ...PythonErrorFragment
  }
}"""
    + PYTHON_ERROR
)

# runs/RunUtils.tsx ("Launch 1 run", via useLaunchWithTelemetry).
LAUNCH_PIPELINE_EXECUTION_MUTATION = (
    """
mutation LaunchPipelineExecution($executionParams: ExecutionParams!) {
  launchPipelineExecution(executionParams: $executionParams) {
    __typename
    ... on LaunchRunSuccess { run { id pipelineName } }
    ... on PipelineNotFoundError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ...PythonErrorFragment
  }
}"""
    + PYTHON_ERROR
)

# instance/backfill/useBackfillDetailsQuery.tsx (the backfill page), with its runs.
BACKFILL_DETAILS_QUERY = (
    """
query BackfillDetailsQuery($backfillId: String!) {
  partitionBackfillOrError(backfillId: $backfillId) {
    __typename
    ... on PartitionBackfill { id status numPartitions isAssetBackfill partitionNames
      assetSelection { path } error { ...PythonErrorFragment }
      runs { id status tags { key value } } }
    ... on BackfillNotFoundError { message }
    ...PythonErrorFragment
  }
}"""
    + PYTHON_ERROR
)

# The runs list (runsOrError with a tag filter), cut to status, job and tags.
RUNS_QUERY = (
    """
query RunsForTest($filter: RunsFilter) {
  runsOrError(filter: $filter) {
    ... on Runs { results { id status jobName tags { key value }
      assetSelection { path } } }
    ...PythonErrorFragment
  }
}"""
    + PYTHON_ERROR
)

# RunLogsQuery (LogsProvider.tsx), with the error of every event kind that carries one.
RUN_LOGS_QUERY = (
    """
query RunLogsQuery($runId: ID!, $cursor: String, $limit: Int) {
  pipelineRunOrError(runId: $runId) { ... on Run { id status } }
  logsForRun(runId: $runId, afterCursor: $cursor, limit: $limit) {
    ... on EventConnection { cursor events { __typename
      ... on MessageEvent { message level stepKey }
      ... on ExecutionStepFailureEvent { error { ...PythonErrorFragment } }
      ... on RunFailureEvent { pipelineRunFailureError: error { ...PythonErrorFragment } }
      ... on EngineEvent { engineError: error { ...PythonErrorFragment } }
      ... on MaterializationEvent { assetKey { path } partition }
    } }
    ...PythonErrorFragment
  }
}"""
    + PYTHON_ERROR
)

# asset-checks/ExecuteChecksButton.tsx ("Execute all" on a table's Checks tab) sends
# LAUNCH_PIPELINE_EXECUTION_MUTATION with an empty assetSelection, the launchable checks as
# assetCheckSelection, runConfigData '{}' and no partition; the Checks tab shows each check's
# partitionStatuses (AssetCheckLiveFragment, asset-data/AssetBaseDataProvider.tsx), cut here
# to the time ranges.
ASSET_CHECK_STATUSES_QUERY = """
query AssetCheckStatusesForTest($assetKeys: [AssetKeyInput!]!) {
  assetNodes(assetKeys: $assetKeys) { id assetKey { path } jobNames
    repository { id name location { id name } }
    assetChecksOrError { ... on AssetChecks { checks { name canExecuteIndividually jobNames
      partitionStatuses { __typename
        ... on AssetCheckTimePartitionStatuses { ranges { startKey endKey status } } } } } }
  }
}"""

# The partition bar of an asset page (AssetPartitionStatus ranges, asset-data/
# AssetBaseDataProvider.tsx's assetPartitionStatuses), cut to the time ranges.
ASSET_PARTITION_STATUSES_QUERY = """
query AssetPartitionStatusesForTest($assetKeys: [AssetKeyInput!]!) {
  assetNodes(assetKeys: $assetKeys) { id assetKey { path }
    assetPartitionStatuses { __typename
      ... on TimePartitionStatuses { ranges { startKey endKey status } } }
  }
}"""

# The asset page's events of one partition (AssetEventsQuery in assets/useRecentAssetEvents.tsx),
# cut to a materialization's partition, description and metadata values.
ASSET_PARTITION_EVENTS_QUERY = """
query AssetPartitionEventsForTest($assetKey: AssetKeyInput!, $partitions: [String!]) {
  assetOrError(assetKey: $assetKey) {
    ... on Asset { id
      assetMaterializations(partitions: $partitions, limit: 100) { partition description
        runId timestamp
        metadataEntries { __typename label
          ... on IntMetadataEntry { intValue }
          ... on FloatMetadataEntry { floatValue }
          ... on TextMetadataEntry { text }
          ... on JsonMetadataEntry { jsonString } } } }
  }
}"""
