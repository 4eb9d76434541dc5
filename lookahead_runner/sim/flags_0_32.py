"""vLLM 0.32.0's `vllm serve` flags, one row per entry of `--help=all`. Data, generated.

Rows were read from tests/fixtures/vllm-0.32.0-cpu/serve-help-all.txt (a real 0.32.0 install):
group | the invocation exactly as argparse prints it | the default as printed | the first sentence of
the help. flags.py turns each row into an argparse argument; the simulator gives meaning only to the
flags that its engine model uses (flags.py, SEMANTIC_0_32) and accepts the rest without effect, so a
capability probe sees the same flag set as on the real server.
"""

GROUPS = {
    'positional arguments': '',
    'options': '',
    'Frontend': 'Arguments for the OpenAI-compatible frontend server.',
    'ModelConfig': 'Configuration for the model.',
    'LoadConfig': 'Configuration for loading the model weights.',
    'AttentionConfig': 'Configuration for attention mechanisms in vLLM.',
    'MambaConfig': 'Configuration for Mamba SSM backends.',
    'StructuredOutputsConfig': 'Dataclass which contains structured outputs config for the engine.',
    'ParallelConfig': 'Configuration for the distributed execution.',
    'CacheConfig': 'Configuration for the KV cache.',
    'OffloadConfig': 'Configuration for model weight offloading to reduce GPU memory usage.',
    'MultiModalConfig': 'Controls the behavior of multimodal models.',
    'LoRAConfig': 'Configuration for LoRA.',
    'LoggingConfig': 'vLLM logging. Default ``dictConfig`` adds a formatted stream handler.',
    'ObservabilityConfig': 'Configuration for observability - metrics and tracing.',
    'SchedulerConfig': 'Scheduler configuration.',
    'CompilationConfig': "Configuration for compilation. You must pass CompilationConfig to VLLMConfig constructor. VLLMConfig's post_init does further initialization.",
    'KernelConfig': 'Configuration for kernel selection and warmup behavior.',
    'VllmConfig': 'Dataclass which contains all vllm-related configuration. This simplifies passing around the distinct configurations in the codebase.',
}

TABLE = """\
positional arguments|model_tag|None|The model tag to serve (optional if specified in config)
options|--aggregate-engine-logging|False|Log aggregate rather than per-engine statistics when using data parallelism.
options|--api-server-count API_SERVER_COUNT, -asc API_SERVER_COUNT|None|How many API server processes to run.
options|--config CONFIG|None|Read CLI options from a config file.
options|--disable-log-stats|False|Disable logging statistics.
options|--enable-log-requests, --no-enable-log-requests|False|Enable logging request information, dependent on log level: - INFO: Request ID, parameters and...
options|--fail-on-environ-validation, --no-fail-on-environ-validation|False|If set, the engine will raise an error if environment validation fails.
options|--gdn-prefill-backend {flashinfer,triton,cutedsl,aiter_flydsl}|None|Select GDN prefill backend.
options|--grpc|False|Launch the Python gRPC (SMG VllmEngine) server on --port instead of the HTTP OpenAI-compatible...
options|--headless|False|Run in headless mode.
options|--kda-decode-backend {auto,native,flashinfer,triton}|None|Select KDA decode backend.
options|--kda-prefill-backend {auto,triton,flashkda,flashinfer,fused}|None|Select KDA prefill backend.
options|--shutdown-timeout SHUTDOWN_TIMEOUT|0|Shutdown timeout in seconds.
options|-h, --help||show this help message and exit
Frontend|--allow-credentials, --no-allow-credentials|False|Allow credentials.
Frontend|--allowed-headers ALLOWED_HEADERS|['*']|Allowed headers.
Frontend|--allowed-methods ALLOWED_METHODS|['*']|Allowed methods.
Frontend|--allowed-origins ALLOWED_ORIGINS|[]|Allowed origins.
Frontend|--anthropic-disabled-thinking-effort {auto,high,low,max,medium,none,xhigh}|auto|Anthropic ``/v1/messages`` only.
Frontend|--api-key API_KEY [API_KEY ...]|None|If provided, the server will require one of these keys to be presented in the header.
Frontend|--chat-template CHAT_TEMPLATE|None|The file path to the chat template, or the template in single-line form for the specified model.
Frontend|--chat-template-content-format {auto,openai,string}|auto|The format to render message content within a chat template.
Frontend|--cohere-format COHERE_FORMAT|cmd4|Cohere ``--tokenizer-mode cohere`` only.
Frontend|--cohere-is-reasoning-model, --no-cohere-is-reasoning-model|True|Cohere ``/cohere/v2/chat`` only.
Frontend|--data-parallel-supervisor-port DATA_PARALLEL_SUPERVISOR_PORT|9256|HTTP port for aggregated health endpoints in multi- port external LB mode.
Frontend|--default-chat-template-kwargs DEFAULT_CHAT_TEMPLATE_KWARGS|None|Default keyword arguments to pass to the chat template renderer.
Frontend|--disable-access-log-for-endpoints DISABLE_ACCESS_LOG_FOR_ENDPOINTS|None|Comma-separated list of endpoint paths to exclude from uvicorn access logs.
Frontend|--disable-fastapi-docs, --no-disable-fastapi-docs|False|Disable FastAPI's OpenAPI schema, Swagger UI, and ReDoc endpoint.
Frontend|--disable-uvicorn-access-log, --no-disable-uvicorn-access-log|False|Disable uvicorn access log.
Frontend|--dp-supervisor-probe-failure-threshold DP_SUPERVISOR_PROBE_FAILURE_THRESHOLD|3|Number of consecutive connection-error retries before a child health probe is declared failed in...
Frontend|--dp-supervisor-probe-interval-s DP_SUPERVISOR_PROBE_INTERVAL_S|5.0|Seconds between aggregated health probes in multi-port external LB mode.
Frontend|--dp-supervisor-probe-timeout-s DP_SUPERVISOR_PROBE_TIMEOUT_S|5.0|Seconds to wait between retries when a child health probe fails with a connection error in...
Frontend|--enable-auto-tool-choice, --no-enable-auto-tool-choice|False|Enable auto tool choice for supported models.
Frontend|--enable-flash-late-interaction, --no-enable-flash-late-interaction|True|If set, run pooling score MaxSim on GPU in the API server process.
Frontend|--enable-force-include-usage, --no-enable-force-include-usage|False|If set to True, including usage on every request.
Frontend|--enable-log-deltas, --no-enable-log-deltas|True|If set to False, output deltas will not be logged.
Frontend|--enable-log-outputs, --no-enable-log-outputs|False|If set to True, log model outputs (generations).
Frontend|--enable-offline-docs, --no-enable-offline-docs|False|Enable offline FastAPI documentation for air-gapped environments.
Frontend|--enable-per-request-metrics, --no-enable-per-request-metrics|False|If set to True, include per-request timing metrics in API responses.
Frontend|--enable-prompt-tokens-details, --no-enable-prompt-tokens-details|False|If set to True, enable prompt_tokens_details in usage.
Frontend|--enable-request-id-headers, --no-enable-request-id-headers|False|If specified, API server will add X-Request-Id header to responses.
Frontend|--enable-scale-out, --no-enable-scale-out|False|If set to True, register the scale-out endpoints (`/render`, `/derender`,...
Frontend|--enable-server-load-tracking, --no-enable-server-load-tracking|False|If set to True, enable tracking server_load_metrics in the app state.
Frontend|--enable-ssl-refresh, --no-enable-ssl-refresh|False|Refresh SSL Context when SSL certificate files change
Frontend|--enable-tokenizer-info-endpoint, --no-enable-tokenizer-info-endpoint|False|Enable the `/tokenizer_info` endpoint.
Frontend|--exclude-tools-when-tool-choice-none, --no-exclude-tools-when-tool-choice-none|False|If specified, exclude tool definitions in prompts when tool_choice='none'.
Frontend|--fingerprint-mode {custom,full,hash,none}|full|Controls the ``system_fingerprint`` field on responses.
Frontend|--fingerprint-value FINGERPRINT_VALUE|None|Literal fingerprint string used when ``--fingerprint- mode=custom``.
Frontend|--grpc-port GRPC_PORT|None|Enable the Rust frontend's additional gRPC Inference and Control services on this port.
Frontend|--h11-max-header-count H11_MAX_HEADER_COUNT|256|Maximum number of HTTP headers allowed in a request for h11 parser.
Frontend|--h11-max-incomplete-event-size H11_MAX_INCOMPLETE_EVENT_SIZE|4194304|Maximum size (bytes) of an incomplete HTTP event (header or body) for h11 parser.
Frontend|--host HOST|None|Host name.
Frontend|--log-error-stack, --no-log-error-stack|False|If set to True, log the stack trace of error responses
Frontend|--lora-modules LORA_MODULES [LORA_MODULES ...]|None|LoRA modules configurations in either 'name=path' format or JSON format or JSON list format.
Frontend|--max-log-len MAX_LOG_LEN|None|Max number of prompt characters or prompt ID numbers being printed in log.
Frontend|--middleware MIDDLEWARE|[]|Additional ASGI middleware to apply to the app.
Frontend|--port PORT|8000|Port number.
Frontend|--response-role RESPONSE_ROLE|assistant|The role name to return if `request.add_generation_prompt=true`.
Frontend|--return-tokens-as-token-ids, --no-return-tokens-as-token-ids|False|When `--max-logprobs` is specified, represents single tokens as strings of the form...
Frontend|--root-path ROOT_PATH|None|FastAPI root_path when app is behind a path based routing proxy.
Frontend|--sse-keep-alive-interval SSE_KEEP_ALIVE_INTERVAL|0|Send an SSE keep-alive comment line every this many seconds when a `/v1/chat/completions` or...
Frontend|--ssl-ca-certs SSL_CA_CERTS|None|The CA certificates file.
Frontend|--ssl-cert-reqs SSL_CERT_REQS|0|Whether client certificate is required (see stdlib ssl module's).
Frontend|--ssl-certfile SSL_CERTFILE|None|The file path to the SSL cert file.
Frontend|--ssl-ciphers SSL_CIPHERS|None|SSL cipher suites for HTTPS (TLS 1.2 and below only).
Frontend|--ssl-keyfile SSL_KEYFILE|None|The file path to the SSL key file.
Frontend|--tokens-only, --no-tokens-only|False|If set to True, only enable the Tokens In<>Out endpoint.
Frontend|--tool-call-parser {apertus,cohere_command3,cohere_command4,deepseek_v3,deepseek_v31,deepseek_v32,deepseek_v4,deepseek_v41,dots,ernie45,functiongemma,gemma4,gigachat3,glm45,glm47,granite,granite-20b-fc,granite4,hermes,hf,hunyuan_a13b,hy_v3,hy_v4,inkling,internlm,jamba,k2_horizon,kimi_k2,kimi_k3,lfm2,ling3,llama3_json,llama4_json,llama4_pythonic,longcat,mimo,minicpm5,minimax_m2,minimax_m3,mistral,muse_glimmer,olmo3,openai,phi4_mini_json,plamo3,poolside_v1,pythonic,qwen3_coder,qwen3_json,qwen3_xml,seed_oss,step3,step3p5,xlam} or name registered in --tool-parser-plugin|None|Select the tool call parser depending on the model that you're using.
Frontend|--tool-parser-plugin TOOL_PARSER_PLUGIN||Special the tool parser plugin write to parse the model-generated tool into OpenAI API format,...
Frontend|--tool-server TOOL_SERVER|None|Comma-separated list of host:port pairs (IPv4, IPv6, or hostname).
Frontend|--tool-strict-level {auto,function,parameter}|auto|Server-side floor for structural-tag based tool calling, applied on top of the per-tool `strict`...
Frontend|--trust-request-chat-template, --no-trust-request-chat-template|False|Whether to trust the chat template provided in the request.
Frontend|--trust-request-mm-kwargs, --no-trust-request-mm-kwargs|False|Whether to trust per-request multimodal kwargs (`mm_processor_kwargs` and `media_io_kwargs`).
Frontend|--uds UDS|None|Unix domain socket path.
Frontend|--uvicorn-log-level {critical,debug,error,info,trace,warning}|info|Log level for uvicorn.
ModelConfig|--allow-deprecated-quantization, --no-allow-deprecated-quantization|False|Whether to allow deprecated quantization methods.
ModelConfig|--allowed-local-media-path ALLOWED_LOCAL_MEDIA_PATH||Allowing API requests to read local images or videos from directories specified by the server...
ModelConfig|--allowed-media-domains ALLOWED_MEDIA_DOMAINS [ALLOWED_MEDIA_DOMAINS ...]|None|If set, only media URLs that belong to this domain can be used for multi-modal inputs.
ModelConfig|--code-revision CODE_REVISION|None|The specific revision to use for the model code on the Hugging Face Hub.
ModelConfig|--config-format ['auto', 'hf', 'mistral']|auto|The format of the model config to load: - "auto" will try to load the config in hf format if...
ModelConfig|--convert {auto,classify,embed,none}|auto|Convert the model using adapters defined in [vllm.model_executor.models.adapters][].
ModelConfig|--disable-cascade-attn, --no-disable-cascade-attn|None|--disable-cascade-attn is deprecated and has no effect since cascade attention has been removed.
ModelConfig|--disable-sliding-window, --no-disable-sliding-window|False|Whether to disable sliding window.
ModelConfig|--dtype {auto,bfloat16,float,float16,float32,half}|auto|Data type for model weights and activations: - "auto" will use FP16 precision for FP32 and FP16...
ModelConfig|--enable-cumem-allocator, --no-enable-cumem-allocator|False|Enable the custom cumem allocator to leverage advanced GPU memory allocation features such as...
ModelConfig|--enable-nccl-comm-suspend, --no-enable-nccl-comm-suspend|False|Enable releasing NCCL communicator memory during sleep mode...
ModelConfig|--enable-prompt-embeds, --no-enable-prompt-embeds|False|If `True`, enables passing text embeddings as inputs via the `prompt_embeds` key.
ModelConfig|--enable-return-routed-experts, --no-enable-return-routed-experts|False|Capture and return routed-experts auxiliary outputs.
ModelConfig|--enable-sleep-mode, --no-enable-sleep-mode|False|Enable sleep mode for the engine (only cuda and hip platforms are supported).
ModelConfig|--enable-trace-replay, --no-enable-trace-replay|False|Whether to allow requests to set `SamplingParams.trace_decode_token_ids`, which forces decoding...
ModelConfig|--enforce-eager, --no-enforce-eager|False|Whether to always use eager-mode PyTorch.
ModelConfig|--generation-config GENERATION_CONFIG|auto|The folder path to the generation config.
ModelConfig|--hf-config-path HF_CONFIG_PATH|None|Name or path of the Hugging Face config to use.
ModelConfig|--hf-overrides HF_OVERRIDES|{}|If a dictionary, contains arguments to be forwarded to the Hugging Face config.
ModelConfig|--hf-token [HF_TOKEN]|None|The token to use as HTTP bearer authorization for remote files .
ModelConfig|--io-processor-plugin IO_PROCESSOR_PLUGIN|None|IOProcessor plugin name to load at model startup
ModelConfig|--logits-processors LOGITS_PROCESSORS [LOGITS_PROCESSORS ...]|None|One or more logits processors' fully-qualified class names or class definitions
ModelConfig|--logprobs-mode {processed_logits,processed_logprobs,raw_logits,raw_logprobs}|raw_logprobs|Indicates the content returned in the logprobs and prompt_logprobs.
ModelConfig|--max-logprobs MAX_LOGPROBS|20|Maximum number of log probabilities to return when `logprobs` is specified in `SamplingParams`.
ModelConfig|--max-model-len MAX_MODEL_LEN|None|Model context length (prompt and output).
ModelConfig|--model MODEL|Qwen/Qwen3-0.6B|Name or path of the Hugging Face model to use.
ModelConfig|--model-class-overrides MODEL_CLASS_OVERRIDES|{}|Override the model class used for one or more architectures, mapping the architecture name to a...
ModelConfig|--model-impl ['auto', 'terratorch', 'transformers', 'vllm']|auto|Which implementation of the model to use: - "auto" will try to use the vLLM implementation, if...
ModelConfig|--override-generation-config OVERRIDE_GENERATION_CONFIG|{}|Overrides or sets generation config.
ModelConfig|--pooler-config POOLER_CONFIG|None|Pooler config which controls the behaviour of output pooling in pooling models.
ModelConfig|--quantization QUANTIZATION, -q QUANTIZATION|None|Method used to quantize the weights.
ModelConfig|--quantization-config QUANTIZATION_CONFIG|None|User-facing quantization configuration.
ModelConfig|--renderer-num-workers RENDERER_NUM_WORKERS|1|Number of worker threads in the renderer thread pool.
ModelConfig|--return-sampling-mask, --no-return-sampling-mask|False|Whether to return the post-processing token support for each sample.
ModelConfig|--revision REVISION|None|The specific model version to use.
ModelConfig|--runner {auto,draft,generate,pooling}|auto|The type of model runner to use.
ModelConfig|--seed SEED|0|Random seed for reproducibility.
ModelConfig|--served-model-name SERVED_MODEL_NAME [SERVED_MODEL_NAME ...]|None|The model name(s) used in the API.
ModelConfig|--skip-tokenizer-init, --no-skip-tokenizer-init|False|Skip initialization of tokenizer and detokenizer.
ModelConfig|--sleep-mode-offload-cudagraph, --no-sleep-mode-offload-cudagraph|False|Back up CUDA graph memory to CPU during sleep, restored in place on wake.
ModelConfig|--sleep-preserve-parameter-names SLEEP_PRESERVE_PARAMETER_NAMES [SLEEP_PRESERVE_PARAMETER_NAMES ...]|[]|Parameter-name globs to preserve across level-2 sleep.
ModelConfig|--tokenizer TOKENIZER|None|Name or path of the Hugging Face tokenizer to use.
ModelConfig|--tokenizer-mode ['auto', 'cohere', 'deepseek_v32', 'deepseek_v4', 'hf', 'inkling', 'kimi_k3', 'mistral']|auto|Tokenizer mode: - "auto" will use the tokenizer from `mistral_common` for Mistral models if...
ModelConfig|--tokenizer-revision TOKENIZER_REVISION|None|The specific revision to use for the tokenizer on the Hugging Face Hub.
ModelConfig|--trust-remote-code, --no-trust-remote-code|False|Trust remote code (e.g., from HuggingFace) when downloading the model and tokenizer.
ModelConfig|--use-fp64-gumbel, --no-use-fp64-gumbel|False|Whether to use FP64 (instead of FP32) random noise for Gumbel-max and equivalent...
LoadConfig|--download-dir DOWNLOAD_DIR|None|Directory to download and load the weights, default to the default cache directory of Hugging Face.
LoadConfig|--ignore-patterns IGNORE_PATTERNS [IGNORE_PATTERNS ...]|['original/**/*']|The list of patterns to ignore when loading the model.
LoadConfig|--load-format LOAD_FORMAT|auto|The format of the model weights to load.
LoadConfig|--model-loader-extra-config MODEL_LOADER_EXTRA_CONFIG|{}|Extra config for model loader.
LoadConfig|--pt-load-map-location PT_LOAD_MAP_LOCATION|cpu|The map location for loading pytorch checkpoint, to support loading checkpoints can only be...
LoadConfig|--safetensors-load-strategy {eager,lazy,prefetch,torchao,None}|None|Specifies the loading strategy for safetensors weights.
LoadConfig|--safetensors-prefetch-block-size SAFETENSORS_PREFETCH_BLOCK_SIZE|16777216|Read size in bytes for each safetensors checkpoint file prefetch.
LoadConfig|--safetensors-prefetch-num-threads SAFETENSORS_PREFETCH_NUM_THREADS|8|Number of worker threads used to prefetch safetensors checkpoint files into the OS page cache...
LoadConfig|--use-tqdm-on-load, --no-use-tqdm-on-load|True|Whether to enable tqdm for showing progress bar when loading model weights.
AttentionConfig|--attention-backend ATTENTION_BACKEND|None|Attention backend to use.
MambaConfig|--enable-mamba-cache-stochastic-rounding, --no-enable-mamba-cache-stochastic-rounding|False|Enable stochastic rounding when writing SSM state to fp16 cache.
MambaConfig|--mamba-backend MAMBA_BACKEND|MambaBackendEnum.TRITON|Mamba SSU backend to use.
MambaConfig|--mamba-cache-philox-rounds MAMBA_CACHE_PHILOX_ROUNDS|0|Number of Philox PRNG rounds for stochastic rounding random number generation.
MambaConfig|--mamba-ssu-algorithm {auto,horizontal,simple,vertical,None}|None|Selective state update algorithm to use with the FlashInfer backend.
StructuredOutputsConfig|--reasoning-parser REASONING_PARSER||Select the reasoning parser depending on the model that you're using.
StructuredOutputsConfig|--reasoning-parser-plugin REASONING_PARSER_PLUGIN||Path to a dynamically reasoning parser plugin that can be dynamically loaded and registered.
ParallelConfig|--all2all-backend {allgather_reducescatter,deepep_high_throughput,deepep_low_latency,deepep_v2,flashinfer_all2allv,flashinfer_nvlink_one_sided,flashinfer_nvlink_two_sided,moonep,mori_high_throughput,mori_low_latency,naive,nixl_ep,pplx}|allgather_reducescatter|All2All backend for MoE expert parallel communication.
ParallelConfig|--cp-kv-cache-interleave-size CP_KV_CACHE_INTERLEAVE_SIZE|None|Interleave size of kv_cache storage while using DCP.
ParallelConfig|--cpu-distributed-timeout-seconds CPU_DISTRIBUTED_TIMEOUT_SECONDS|None|Timeout (in seconds) for cpu communication groups.
ParallelConfig|--data-parallel-address DATA_PARALLEL_ADDRESS, -dpa DATA_PARALLEL_ADDRESS|None|Address of data parallel cluster head-node.
ParallelConfig|--data-parallel-backend DATA_PARALLEL_BACKEND, -dpb DATA_PARALLEL_BACKEND|mp|Backend for data parallel, either "mp" or "ray".
ParallelConfig|--data-parallel-external-lb, --no-data-parallel-external-lb, -dpe|False|Whether to use "external" DP LB mode.
ParallelConfig|--data-parallel-hybrid-lb, --no-data-parallel-hybrid-lb, -dph|False|Whether to use "hybrid" DP LB mode.
ParallelConfig|--data-parallel-multi-port-external-lb, -dpm|False|Run a node-local supervisor that launches one external-LB API server per local data parallel...
ParallelConfig|--data-parallel-rank DATA_PARALLEL_RANK, -dpn DATA_PARALLEL_RANK|None|Data parallel rank of this instance.
ParallelConfig|--data-parallel-rpc-port DATA_PARALLEL_RPC_PORT, -dpp DATA_PARALLEL_RPC_PORT|None|Fixed port for data parallel RPC communication.
ParallelConfig|--data-parallel-size DATA_PARALLEL_SIZE, -dp DATA_PARALLEL_SIZE|1|Number of data parallel groups.
ParallelConfig|--data-parallel-size-local DATA_PARALLEL_SIZE_LOCAL, -dpl DATA_PARALLEL_SIZE_LOCAL|None|Number of data parallel replicas to run on this node.
ParallelConfig|--data-parallel-start-rank DATA_PARALLEL_START_RANK, -dpr DATA_PARALLEL_START_RANK|None|Starting data parallel rank for secondary nodes.
ParallelConfig|--dbo-decode-token-threshold DBO_DECODE_TOKEN_THRESHOLD|32|The threshold for dual batch overlap for batches only containing decodes.
ParallelConfig|--dbo-prefill-token-threshold DBO_PREFILL_TOKEN_THRESHOLD|512|The threshold for dual batch overlap for batches that contain one or more prefills.
ParallelConfig|--dcp-comm-backend {a2a,ag_rs,None}|None|Communication backend for Decode Context Parallel (DCP).
ParallelConfig|--dcp-kv-cache-interleave-size DCP_KV_CACHE_INTERLEAVE_SIZE|1|Interleave size of kv_cache storage while using DCP.
ParallelConfig|--dcp-q-replicate, --no-dcp-q-replicate|None|Replicate the MLA query projection within each DCP group so decode can skip the query all-gather.
ParallelConfig|--decode-context-parallel-size DECODE_CONTEXT_PARALLEL_SIZE, -dcp DECODE_CONTEXT_PARALLEL_SIZE|1|Number of ranks that shard the decode KV cache.
ParallelConfig|--device-ids DEVICE_IDS|None|Comma-separated physical GPU device IDs or UUIDs to use (e.g.
ParallelConfig|--disable-custom-all-reduce, --no-disable-custom-all-reduce|False|Disable the custom all-reduce kernel and fall back to NCCL.
ParallelConfig|--disable-nccl-for-dp-synchronization, --no-disable-nccl-for-dp-synchronization|None|Forces the dp synchronization logic in vllm/v1/worker/dp_utils.py  to use Gloo instead of NCCL...
ParallelConfig|--distributed-executor-backend ['external_launcher', 'mp', 'ray', 'uni']|None|Backend to use for distributed model workers, either "ray" or "mp" (multiprocessing).
ParallelConfig|--distributed-timeout-seconds DISTRIBUTED_TIMEOUT_SECONDS|None|Timeout in seconds for distributed operations (e.g., init_process_group).
ParallelConfig|--dp-sync-interval DP_SYNC_INTERVAL|16|Steps between DP finish-sync all-reduces; must match across DP ranks.
ParallelConfig|--elastic-ep-max-dp-size ELASTIC_EP_MAX_DP_SIZE|None|Maximum data parallel size supported by elastic expert parallelism.
ParallelConfig|--enable-batch-sharded-sampling, --no-enable-batch-sharded-sampling|None|Use sharded sampling across tensor parallel ranks.
ParallelConfig|--enable-dbo, --no-enable-dbo|False|Enable dual batch overlap for the model executor.
ParallelConfig|--enable-elastic-ep, --no-enable-elastic-ep|False|Enable elastic expert parallelism with stateless NCCL groups for DP/EP.
ParallelConfig|--enable-ep-weight-filter, --no-enable-ep-weight-filter|False|Skip non-local expert weights during model loading when expert parallelism is active.
ParallelConfig|--enable-eplb, --no-enable-eplb|False|Enable expert parallelism load balancing for MoE layers.
ParallelConfig|--enable-expert-parallel, --no-enable-expert-parallel, -ep|False|Use expert parallelism instead of tensor parallelism for MoE layers.
ParallelConfig|--enable-fault-tolerance, --no-enable-fault-tolerance|False|Enable fault tolerance for detailed error recovery, such as scaling down fault DPEngineCore.
ParallelConfig|--enable-hc-sp, --no-enable-hc-sp|False|Enable sequence parallelism for HyperConnection (HC) computation.
ParallelConfig|--enable-shm-tensor-arena, --no-enable-shm-tensor-arena|False|Route large CPU tensors (e.g.
ParallelConfig|--eplb-config EPLB_CONFIG|EPLBConfig(window_size=1000, step_interval=3000, num_redundant_experts=0, log_balancedness=False, log_balancedness_interval=1, use_async=True, policy='default', communicator=None, enable_migration_batching=False)|Expert parallelism configuration.
ParallelConfig|--expert-placement-strategy {linear,round_robin}|linear|The expert placement strategy for MoE layers: - "linear": Experts are placed in a contiguous manner.
ParallelConfig|--fault-tolerance-config FAULT_TOLERANCE_CONFIG|FaultToleranceConfig(engine_recovery_timeout_sec=120)|The configurations for fault tolerance.
ParallelConfig|--master-addr MASTER_ADDR|127.0.0.1|distributed master address for multi-node distributed inference when...
ParallelConfig|--master-port MASTER_PORT|29501|distributed master port for multi-node distributed inference when distributed_executor_backend...
ParallelConfig|--max-parallel-loading-workers MAX_PARALLEL_LOADING_WORKERS|None|Maximum number of parallel loading workers when loading model sequentially in multiple batches.
ParallelConfig|--nnodes NNODES, -n NNODES|1|num of nodes for multi-node distributed inference when distributed_executor_backend is mp.
ParallelConfig|--node-rank NODE_RANK, -r NODE_RANK|0|distributed node rank for multi-node distributed inference when distributed_executor_backend is mp.
ParallelConfig|--numa-bind, --no-numa-bind|False|Enable NUMA binding for GPU worker subprocesses.
ParallelConfig|--numa-bind-cpus NUMA_BIND_CPUS [NUMA_BIND_CPUS ...]|None|Optional CPU lists to bind each GPU worker to.
ParallelConfig|--numa-bind-nodes NUMA_BIND_NODES [NUMA_BIND_NODES ...]|None|NUMA node to bind each GPU worker to.
ParallelConfig|--pipeline-parallel-size PIPELINE_PARALLEL_SIZE, -pp PIPELINE_PARALLEL_SIZE|1|Number of pipeline parallel groups.
ParallelConfig|--prefill-context-parallel-size PREFILL_CONTEXT_PARALLEL_SIZE, -pcp PREFILL_CONTEXT_PARALLEL_SIZE|1|Number of ranks that split prefill sequence computation.
ParallelConfig|--ray-workers-use-nsight, --no-ray-workers-use-nsight|False|Whether to profile Ray workers with nsight, see...
ParallelConfig|--tensor-parallel-size TENSOR_PARALLEL_SIZE, -tp TENSOR_PARALLEL_SIZE|1|Number of tensor parallel groups.
ParallelConfig|--ubatch-size UBATCH_SIZE|0|Number of ubatch size.
ParallelConfig|--worker-cls WORKER_CLS|auto|The full name of the worker class to use.
ParallelConfig|--worker-extension-cls WORKER_EXTENSION_CLS||The full name of the worker extension class to use.
CacheConfig|--block-size BLOCK_SIZE|None|Size of a contiguous cache block in number of tokens.
CacheConfig|--enable-mamba-shared-prefix-checkpoint, --no-enable-mamba-shared-prefix-checkpoint|False|Also register a Mamba "align" checkpoint at the shared-prefix junction -- where an EAGLE/MTP...
CacheConfig|--enable-prefix-caching, --no-enable-prefix-caching|None|Whether to enable prefix caching.
CacheConfig|--gpu-memory-utilization GPU_MEMORY_UTILIZATION, --device-memory-utilization GPU_MEMORY_UTILIZATION|0.92|The fraction of GPU memory to be used for the model executor, which can range from 0 to 1.
CacheConfig|--kv-cache-dtype {auto,bfloat16,float16,fp8,fp8_ds_mla,fp8_e4m3,fp8_e5m2,fp8_inc,fp8_per_token_head,int4_per_token_head,int8_per_token_head,nvfp4,nvfp4_4over6,nvfp4_ds_mla,turboquant_3bit_nc,turboquant_4bit_nc,turboquant_k3v4_nc,turboquant_k8v4,ultraquant_4bit}|auto|Data type for kv cache storage.
CacheConfig|--kv-cache-dtype-skip-layers KV_CACHE_DTYPE_SKIP_LAYERS [KV_CACHE_DTYPE_SKIP_LAYERS ...]|[]|Layer patterns to skip KV cache quantization.
CacheConfig|--kv-cache-memory-bytes KV_CACHE_MEMORY_BYTES|None|Size of KV Cache per GPU in bytes.
CacheConfig|--kv-offloading-backend {lmcache,native}|native|The backend to use for KV cache offloading.
CacheConfig|--kv-offloading-size KV_OFFLOADING_SIZE|None|Size of the KV cache offloading buffer in GiB.
CacheConfig|--kv-sharing-fast-prefill, --no-kv-sharing-fast-prefill|False|In some KV sharing setups, e.g.
CacheConfig|--mamba-block-size MAMBA_BLOCK_SIZE|None|Size of a contiguous cache block in number of tokens for mamba cache.
CacheConfig|--mamba-cache-dtype {auto,bfloat16,float16,float32}|auto|The data type to use for the Mamba cache (both the conv as well as the ssm state).
CacheConfig|--mamba-cache-mode {align,none}|none|The cache strategy for Mamba layers: - "none": set when prefix caching is disabled.
CacheConfig|--mamba-ssm-cache-dtype {auto,bfloat16,float16,float32}|auto|The data type to use for the Mamba cache (ssm state only, conv state will still be controlled by...
CacheConfig|--num-gpu-blocks-override NUM_GPU_BLOCKS_OVERRIDE|None|Number of GPU blocks to use.
CacheConfig|--prefix-cache-retention-interval PREFIX_CACHE_RETENTION_INTERVAL|0|Token interval between retained sliding-window and Mamba prefix-cache checkpoints.
CacheConfig|--prefix-caching-hash-algo {sha256,sha256_cbor,xxhash,xxhash_cbor}|sha256|Set the hash algorithm for prefix caching: - "sha256" uses Pickle for object serialization...
CacheConfig|--prefix-match-unit PREFIX_MATCH_UNIT|None|The finest token boundary (in tokens) a prefix-cache hit can land on.
CacheConfig|--replayssm-buffer-len REPLAYSSM_BUFFER_LEN|16|ReplaySSM logical history length B for Mamba2.
CacheConfig|--swa-bounded-replay, --no-swa-bounded-replay|True|Keep the sliding-window KV of models that support it (DeepSeek-V4.1) out of prefix caching and...
CacheConfig|--use-replayssm, --no-use-replayssm|False|Use the ReplaySSM Mamba2 decode kernel: cache recent SSM inputs and skip the per-step full-state...
OffloadConfig|--cpu-offload-gb CPU_OFFLOAD_GB|0|The space in GiB to offload to CPU, per GPU.
OffloadConfig|--cpu-offload-params CPU_OFFLOAD_PARAMS [CPU_OFFLOAD_PARAMS ...]|set()|The set of parameter name segments to target for CPU offloading.
OffloadConfig|--offload-backend {auto,prefetch,uva}|auto|The backend for weight offloading.
OffloadConfig|--offload-group-size OFFLOAD_GROUP_SIZE|0|Group every N layers together.
OffloadConfig|--offload-num-in-group OFFLOAD_NUM_IN_GROUP|1|Number of layers to offload per group.
OffloadConfig|--offload-params OFFLOAD_PARAMS [OFFLOAD_PARAMS ...]|set()|The set of parameter name segments to target for prefetch offloading.
OffloadConfig|--offload-prefetch-step OFFLOAD_PREFETCH_STEP|1|Number of layers to prefetch ahead.
MultiModalConfig|--enable-mm-embeds, --no-enable-mm-embeds|False|If `True`, enables passing multimodal embeddings: for `LLM` class, this refers to tensor inputs...
MultiModalConfig|--interleave-mm-strings, --no-interleave-mm-strings|False|Enable fully interleaved support for multimodal prompts, while using...
MultiModalConfig|--language-model-only, --no-language-model-only|False|If True, disables all multimodal inputs by setting all modality limits to 0.
MultiModalConfig|--limit-mm-per-prompt LIMIT_MM_PER_PROMPT|{}|The maximum number of input items and options allowed per prompt for each modality.
MultiModalConfig|--media-io-kwargs MEDIA_IO_KWARGS|{}|Additional args passed to process media inputs, keyed by modalities.
MultiModalConfig|--mm-device-do-normalize, --no-mm-device-do-normalize|None|Move the do_normalize computation in the mm preprocessing to before the ViT,  and let the device...
MultiModalConfig|--mm-encoder-attn-backend MM_ENCODER_ATTN_BACKEND|None|Optional override for the multi-modal encoder attention backend when using vision transformers.
MultiModalConfig|--mm-encoder-attn-dtype {fp8,None}|None|Optional dtype override for ViT encoder attention.
MultiModalConfig|--mm-encoder-fp8-scale-path MM_ENCODER_FP8_SCALE_PATH|None|Path to a JSON file containing per-layer FP8 Q/K/V scales for ViT encoder attention.
MultiModalConfig|--mm-encoder-fp8-scale-save-margin MM_ENCODER_FP8_SCALE_SAVE_MARGIN|1.5|Safety margin multiplied onto scales when auto-saving.
MultiModalConfig|--mm-encoder-fp8-scale-save-path MM_ENCODER_FP8_SCALE_SAVE_PATH|None|When set with dynamic FP8 scaling (`mm_encoder_attn_dtype="fp8"` and no...
MultiModalConfig|--mm-encoder-only, --no-mm-encoder-only|False|When enabled, skips the language component of the model.
MultiModalConfig|--mm-encoder-tp-mode {data,weights}|weights|Indicates how to optimize multi-modal encoder inference using tensor parallelism (TP).
MultiModalConfig|--mm-hasher-algorithm {blake3,sha256,sha512}|blake3|Hash algorithm to use for multi-modal input caching.
MultiModalConfig|--mm-ipc-gpu-memory-gb MM_IPC_GPU_MEMORY_GB|0|Amount of GPU memory (in GiB) sequestered on the engine's device for GPU-side multimodal work in...
MultiModalConfig|--mm-processor-cache-gb MM_PROCESSOR_CACHE_GB|4|The size (in GiB) of the multi-modal processor cache, which is used to avoid re-processing past...
MultiModalConfig|--mm-processor-cache-type {lru,shm}|lru|Type of cache to use for the multi-modal preprocessor/mapper.
MultiModalConfig|--mm-processor-device {auto,cpu}|auto|Device the HF multi-modal processor runs the image/video transform on.
MultiModalConfig|--mm-processor-kwargs MM_PROCESSOR_KWARGS|None|Arguments to be forwarded to the model's processor for multi-modal data, e.g., image processor.
MultiModalConfig|--mm-shm-cache-max-object-size-mb MM_SHM_CACHE_MAX_OBJECT_SIZE_MB|128|Size limit (in MiB) for each object stored in the multi-modal processor shared memory cache.
MultiModalConfig|--mm-tensor-ipc {direct_rpc,torch_shm}|direct_rpc|IPC (inter-process communication) method for multimodal tensors.
MultiModalConfig|--skip-mm-profiling, --no-skip-mm-profiling|False|When enabled, skips multimodal memory profiling and only profiles with language backbone model...
MultiModalConfig|--video-pruning-method {evs,vidcom2}|evs|Video token pruning algorithm applied when `video_pruning_rate` > 0: - "evs": Efficient Video...
MultiModalConfig|--video-pruning-rate VIDEO_PRUNING_RATE|None|Fraction of video tokens to prune from each video.
LoRAConfig|--default-mm-loras DEFAULT_MM_LORAS|None|Dictionary mapping specific modalities to LoRA model paths; this field is only applicable to...
LoRAConfig|--enable-lora, --no-enable-lora|None|If True, enable handling of LoRA adapters.
LoRAConfig|--enable-mixed-moe-lora-format, --no-enable-mixed-moe-lora-format|False|If True, force the engine to use the universal 2D MoE LoRA wrapper (`FusedMoEWithLoRA`)...
LoRAConfig|--enable-moe-shared-loras, --no-enable-moe-shared-loras|False|If True, load MoE expert adapters in the "shared- outer" layout, where the gate/up (`w1`/`w3`)...
LoRAConfig|--enable-tower-connector-lora, --no-enable-tower-connector-lora|False|If `True`, LoRA support for the tower (vision encoder) and connector  of multimodal models will...
LoRAConfig|--fully-sharded-loras, --no-fully-sharded-loras|False|By default, only half of the LoRA computation is sharded with tensor parallelism.
LoRAConfig|--lora-dtype {auto,bfloat16,float16}|auto|Data type for LoRA.
LoRAConfig|--lora-target-modules LORA_TARGET_MODULES [LORA_TARGET_MODULES ...]|None|Restrict LoRA to specific module suffixes (e.g., ["o_proj", "qkv_proj"]).
LoRAConfig|--max-cpu-loras MAX_CPU_LORAS|None|Maximum number of LoRAs to store in CPU memory.
LoRAConfig|--max-lora-cls-labels MAX_LORA_CLS_LABELS|None|Maximum output size for LoRA classification heads.
LoRAConfig|--max-lora-rank {1,8,16,32,64,128,256,320,512}|16|Max LoRA rank.
LoRAConfig|--max-loras MAX_LORAS|1|Max number of LoRAs in a single batch.
LoRAConfig|--specialize-active-lora, --no-specialize-active-lora|False|Whether to construct lora kernel grid by the number of active LoRA adapters.
LoggingConfig|--log-config-file PYLOGGING_CONFIG_FILE||--log-config-file is deprecated and will be removed in v0.33.0.
LoggingConfig|--log-level {CRITICAL,ERROR,WARNING,INFO,DEBUG,NOTSET}||Shortcut for --logging-config.log_level.
LoggingConfig|--logging-config LOGGING_CONFIG||Logging configuration.
ObservabilityConfig|--collect-detailed-traces {all,model,worker,None} [{all,model,worker,None} ...]|None|It makes sense to set this only if `--otlp-traces- endpoint` is set.
ObservabilityConfig|--cudagraph-metrics, --no-cudagraph-metrics|False|Enable CUDA graph metrics (number of padded/unpadded tokens, runtime cudagraph dispatch modes,...
ObservabilityConfig|--custom-histogram-buckets CUSTOM_HISTOGRAM_BUCKETS|None|Custom Prometheus histogram bucket boundaries, as a JSON mapping from bucket-family key to a...
ObservabilityConfig|--enable-layerwise-nvtx-tracing, --no-enable-layerwise-nvtx-tracing|False|Enable layerwise NVTX tracing.
ObservabilityConfig|--enable-logging-iteration-details, --no-enable-logging-iteration-details|False|Enable detailed logging of iteration details.
ObservabilityConfig|--enable-mfu-metrics, --no-enable-mfu-metrics|False|Enable Model FLOPs Utilization (MFU) metrics.
ObservabilityConfig|--jit-monitor-mode {error,warn}|warn|How to handle post-warmup JIT compilation events.
ObservabilityConfig|--jit-monitor-verbose, --no-jit-monitor-verbose|False|Log every monitored JIT compile with runtime details.
ObservabilityConfig|--kv-cache-metrics, --no-kv-cache-metrics|False|Enable KV cache residency metrics (lifetime, idle time, reuse gaps).
ObservabilityConfig|--kv-cache-metrics-sample KV_CACHE_METRICS_SAMPLE|0.01|Sampling rate for KV cache metrics (0.0, 1.0].
ObservabilityConfig|--otlp-traces-endpoint OTLP_TRACES_ENDPOINT|None|Target URL to which OpenTelemetry traces will be sent.
ObservabilityConfig|--per-request-spec-decode-metrics {detailed,none,summary}|none|Include per-request speculative-decoding acceptance metrics in the response under...
ObservabilityConfig|--show-hidden-metrics-for-version SHOW_HIDDEN_METRICS_FOR_VERSION|None|Enable deprecated Prometheus metrics that have been hidden since the specified version.
SchedulerConfig|--async-scheduling, --no-async-scheduling|None|If set to False, disable async scheduling.
SchedulerConfig|--disable-chunked-mm-input, --no-disable-chunked-mm-input|False|If set to true and chunked prefill is enabled, we do not want to partially schedule a multimodal...
SchedulerConfig|--disable-hybrid-kv-cache-manager, --no-disable-hybrid-kv-cache-manager|None|If set to True, KV cache manager will allocate the same size of KV cache for all attention...
SchedulerConfig|--enable-chunked-prefill, --no-enable-chunked-prefill|None|If True, prefill requests can be chunked based on the remaining `max_num_batched_tokens`.
SchedulerConfig|--long-prefill-token-threshold LONG_PREFILL_TOKEN_THRESHOLD|0|For chunked prefill, a request is considered long if the prompt is longer than this number of...
SchedulerConfig|--long-prefill-token-threshold-adaptive, --no-long-prefill-token-threshold-adaptive|False|Floor the effective long prefill token threshold at a fair share of the token budget:...
SchedulerConfig|--max-num-active-seqs MAX_NUM_ACTIVE_SEQS|None|Maximum number of requests the scheduler admits into RUNNING.
SchedulerConfig|--max-num-batched-tokens MAX_NUM_BATCHED_TOKENS|None|Maximum number of tokens that can be processed in a single iteration.
SchedulerConfig|--max-num-queued-reqs MAX_NUM_QUEUED_REQS|None|Maximum number of requests that can be in-flight (waiting or running) at the same time, or None...
SchedulerConfig|--max-num-queued-tokens MAX_NUM_QUEUED_TOKENS|None|Maximum total prompt tokens of requests currently in the prefill phase, or None for no limit.
SchedulerConfig|--max-num-scheduled-tokens MAX_NUM_SCHEDULED_TOKENS|None|Maximum number of tokens that the scheduler may issue in a single iteration.
SchedulerConfig|--max-num-seqs MAX_NUM_SEQS|None|Maximum number of sequences to be processed in a single iteration.
SchedulerConfig|--prefill-schedule-interval PREFILL_SCHEDULE_INTERVAL|1|For data-parallel deployments, only admit new prefill requests once every N engine steps,...
SchedulerConfig|--scheduler-cls SCHEDULER_CLS|None|The scheduler class to use.
SchedulerConfig|--scheduler-reserve-full-isl, --no-scheduler-reserve-full-isl|True|If True, the scheduler checks whether the full input sequence length fits in the KV cache before...
SchedulerConfig|--scheduling-policy {fcfs,priority}|fcfs|The scheduling policy to use: - "fcfs" means first come first served, i.e.
SchedulerConfig|--stream-interval STREAM_INTERVAL|1|The interval (or buffer size) for streaming in terms of token length.
SchedulerConfig|--watermark WATERMARK|0.0|Fraction of total KV cache blocks to keep free (the watermark) when admitting waiting or...
CompilationConfig|--cudagraph-capture-sizes CUDAGRAPH_CAPTURE_SIZES [CUDAGRAPH_CAPTURE_SIZES ...]|None|Sizes to capture cudagraph.
CompilationConfig|--max-cudagraph-capture-size MAX_CUDAGRAPH_CAPTURE_SIZE|None|The maximum cudagraph capture size.
KernelConfig|--enable-flashinfer-autotune, --no-enable-flashinfer-autotune|None|If True, run FlashInfer autotuning during kernel warmup.
KernelConfig|--ir-op-priority IR_OP_PRIORITY|IrOpPriorityConfig(rms_norm=[], fused_add_rms_norm=[], gelu_and_mul_sparse=[])|vLLM IR op priority for dispatching/lowering during the forward pass.
KernelConfig|--linear-backend {aiter,auto,b12x,conch,cutlass,deep_gemm,emulation,exllama,fbgemm,flashinfer_b12x,flashinfer_cudnn,flashinfer_cutedsl,flashinfer_cutlass,flashinfer_trtllm,humming,machete,marlin,torch,triton,xpu,xpu_woq}|auto|Backend for linear layer GEMM kernels.
KernelConfig|--moe-backend {aiter,aiter_mega_moe,aiter_triton_mxfp4_bf16,auto,b12x,batched_triton,cutlass,deep_gemm,deep_gemm_mega_moe,emulation,flashinfer_b12x,flashinfer_cutedsl,flashinfer_cutlass,flashinfer_moe_ep_cutedsl,flashinfer_moe_ep_mega_deep_gemm,flashinfer_trtllm,flydsl,hpc,humming,marlin,rdna3,triton,triton_unfused}|auto|Backend for MoE expert computation kernels.
KernelConfig|--sparse-indexer-topk-backend {aiter,auto,cooperative,deep_select,flashinfer,per_row,persistent,torch}|auto|Backend for the DSA sparse indexer decode top-k kernel.
VllmConfig|--additional-config ADDITIONAL_CONFIG|{}|Additional config for specified platform.
VllmConfig|--attention-config ATTENTION_CONFIG, -ac ATTENTION_CONFIG|AttentionConfig(backend=None, minimax_m3_msa_decode_backend='triton', backend_per_kind={}, flash_attn_version=None, flash_attn_max_num_splits_for_cuda_graph=32, tokenspeed_mla_min_split_kv=1, tq_max_kv_splits_for_cuda_graph=32, use_trtllm_attention=None, disable_flashinfer_q_quantization=False, mla_prefill_backend=None, use_prefill_query_quantization=False, indexer_kv_dtype='auto', indexer_sparse_logits=False, hisparse_config=None, use_non_causal=False, sparse_mla_force_mqa=False, sparse_mla_prefill_workspace_factor=None, flex_attn_block_m=None, flex_attn_block_n=None, flex_attn_q_block_size=None, flex_attn_kv_block_size=None)|Attention configuration.
VllmConfig|--aux-output-config AUX_OUTPUT_CONFIG|AuxOutputConfig(enable_return_routed_experts=False, max_bytes=None)|Execution auxiliary output configuration.
VllmConfig|--compilation-config COMPILATION_CONFIG, -cc COMPILATION_CONFIG|{'mode': None, 'debug_dump_path': None, 'cache_dir': '', 'compile_cache_save_format': 'binary', 'backend': 'inductor', 'custom_ops': [], 'ir_enable_torch_wrap': None, 'splitting_ops': None, 'compile_mm_encoder': False, 'cudagraph_mm_encoder': False, 'encoder_cudagraph_token_budgets': [], 'encoder_cudagraph_max_vision_items_per_batch': 0, 'encoder_cudagraph_max_frames_per_batch': None, 'cudagraph_decoder_replay': True, 'decoder_replay_cudagraph_capture_sizes': [], 'decoder_replay_trim_threshold': 768, 'compile_sizes': None, 'compile_ranges_endpoints': None, 'inductor_compile_config': {'enable_auto_functionalized_v2': False}, 'inductor_passes': {}, 'cudagraph_mode': None, 'cudagraph_num_of_warmups': 0, 'cudagraph_capture_sizes': None, 'cudagraph_copy_inputs': False, 'cudagraph_specialize_lora': True, 'use_inductor_graph_partition': None, 'pass_config': {}, 'max_cudagraph_capture_size': None, 'dynamic_shapes_config': {'type': <DynamicShapesType.BACKED: 'backed'>, 'evaluate_guards': False, 'assume_32_bit_indexing': False}, 'local_cache_dir': None, 'fast_moe_cold_start': None, 'static_all_moe_layers': []}|`torch.compile` and cudagraph capture configuration for the model.
VllmConfig|--diffusion-config DIFFUSION_CONFIG, -dc DIFFUSION_CONFIG|None|Diffusion LLM (dLLM) configuration.
VllmConfig|--ec-manager-config EC_MANAGER_CONFIG|EncoderCacheManagerConf ig(encoder_cache_manager_cls=None, manager_config={})|The configurations for custom encoder cache manager.
VllmConfig|--ec-transfer-config EC_TRANSFER_CONFIG|None|The configurations for distributed EC cache transfer.
VllmConfig|--engram-config ENGRAM_CONFIG|None|N-gram embedding storage and sharding settings.
VllmConfig|--kernel-config KERNEL_CONFIG|KernelConfig(ir_op_prio rity=IrOpPriorityConfig(rms_norm=[], fused_add_rms_norm=[], gelu_and_mul_sparse=[]), enable_flashinfer_autotune=None, enable_rocm_segmented_attn_autotune=False, enable_cutedsl_warmup=True, enable_jit_warmup=True, moe_backend='auto', sparse_indexer_topk_backend='auto', linear_backend='auto', linear_backend_per_quant=None)|Kernel configuration.
VllmConfig|--kv-events-config KV_EVENTS_CONFIG|None|The configurations for event publishing.
VllmConfig|--kv-transfer-config KV_TRANSFER_CONFIG|None|The configurations for distributed KV cache transfer.
VllmConfig|--optimization-level OPTIMIZATION_LEVEL|2|The optimization level.
VllmConfig|--performance-mode {balanced,interactivity,throughput}|balanced|Performance mode for runtime behavior, 'balanced' is the default.
VllmConfig|--profiler-config PROFILER_CONFIG|ProfilerConfig(profiler=None, torch_profiler_dir='', torch_profiler_activities=None, proton_profiler_dir='', proton_context='shadow', proton_data='tree', proton_backend=None, proton_mode=None, proton_hook=None, proton_output_format=None, proton_graph_attribution=False, torch_profiler_with_stack=True, torch_profiler_with_flops=False, torch_profiler_use_gzip=True, torch_profiler_dump_cuda_time_total=True, torch_profiler_record_shapes=False, torch_profiler_with_memory=False, capture_torch_profiler=False, detailed_trace_annotation=False, ignore_frontend=False, delay_iterations=0, max_iterations=0, warmup_iterations=0, active_iterations=5, wait_iterations=0)|Profiling configuration.
VllmConfig|--reasoning-config REASONING_CONFIG|None|The configurations for reasoning model.
VllmConfig|--spec-method {bailing_hybrid_mtp,bailing_hybrid_v3_mtp,custom_class,deepseek_mtp,dflash,dots3_note_mtp,draft_model,dspark,eagle,eagle3,ernie_mtp,exaone4_5_mtp,exaone_moe_mtp,extract_hidden_states,gemma4_mtp,glm4_moe_lite_mtp,glm4_moe_mtp,glm5_next_mtp,glm_ocr_mtp,hy_v3_mtp,hy_v4_mtp,inkling_mtp,kimi_k3_mtp,longcat_flash_mtp,medusa,mimo_mtp,mimo_v2_mtp,minimax_m3_mtp,mlp_speculator,mtp,nemotron_h_mtp,ngram,ngram_gpu,pangu_ultra_moe_mtp,qwen3_5_mtp,qwen3_next_mtp,qwen4_exp_mtp,step3p5_mtp,suffix,None}|None|The name of the speculative method to use.
VllmConfig|--spec-model SPEC_MODEL|None|The name of the draft model, eagle head, or additional weights, if provided.
VllmConfig|--spec-tokens SPEC_TOKENS|None|The number of speculative tokens, if provided.
VllmConfig|--speculative-config SPECULATIVE_CONFIG, -sc SPECULATIVE_CONFIG|None|Speculative decoding configuration.
VllmConfig|--structured-outputs-config STRUCTURED_OUTPUTS_CONFIG|StructuredOutputsConfig(backend='auto', disable_any_whitespace=False, disable_additional_properties=False, reasoning_parser='', reasoning_parser_plugin='', enable_in_reasoning=False)|Structured outputs configuration.
VllmConfig|--watermark-config WATERMARK_CONFIG|None|Text watermarking configuration.
VllmConfig|--weight-transfer-config WEIGHT_TRANSFER_CONFIG|None|The configurations for weight transfer during RL training.
"""
