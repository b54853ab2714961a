"""The fragments of the flower-operator README (a `pools:` list, a `supernodes:` or
`superlink:` block, a `nodeConfig:` map), verbatim: tests/support/operator_examples.py
pastes each into the smallest federation around it."""

POOL_CONFIGURATION = """
supernodes:
  image: flwr/supernode:1.25.0  # Default image for all pools
  pools:
    - name: cpu-pool
      replicas: 4  # StatefulSet mode only
      images: {}   # Uses default image
      supernodeResources:
        requests:
          cpu: "1"
          memory: "2Gi"

    - name: gpu-pool
      replicas: 2
      images:
        supernode: my-registry/supernode-gpu:1.25.0  # Docker image with dependencies for the GPU training
      gpu:
        enabled: true
        vendor: nvidia
        resourceName: nvidia.com/gpu
        count: 1 # use one nvidia GPU in the SuperNode pod
"""

GPU_NVIDIA = """
pools:
  - name: nvidia-pool
    replicas: 2
    images: {}
    gpu:
      enabled: true
      vendor: nvidia
      resourceName: nvidia.com/gpu
      count: 1
"""

GPU_AMD = """
pools:
  - name: amd-pool
    replicas: 2
    images: {}
    gpu:
      enabled: true
      vendor: amd
      resourceName: amd.com/gpu
      count: 1
"""

# No replicas in the README, so it is a DaemonSet pool.
GPU_MOUNT_ALL = """
pools:
  - name: all-gpus
    images: {}
    gpu:
      enabled: true
      vendor: nvidia
      mountAll: true  # Requires vendor to be set
"""

GPU_MIXED = """
supernodes:
  image: flwr/supernode:1.25.0
  pools:
    - name: cpu-only
      replicas: 4
      images: {}

    - name: nvidia-gpus
      replicas: 2
      images:
        supernode: my-registry/supernode-nvidia:1.25.0 # Image with NVIDIA dependencies
      gpu:
        enabled: true
        vendor: nvidia
        resourceName: nvidia.com/gpu
        count: 1

    - name: amd-gpus
      replicas: 2
      images:
        supernode: my-registry/supernode-amd:1.25.0 # Image with AMD dependencies
      gpu:
        enabled: true
        vendor: amd
        resourceName: amd.com/gpu
        count: 1
"""

# "Static Configuration": a bare nodeConfig map, given a pool to live in.
NODECONFIG_STATIC = """
nodeConfig:
  dataset: "cifar10"
  batch-size: "32"
  learning-rate: "0.01"
"""

RESOURCES_SUPERLINK = """
superlink:
  image: flwr/superlink:1.25.0
  resources:
    requests:
      memory: "256Mi"
      cpu: "100m"
    limits:
      memory: "512Mi"
      cpu: "500m"
  # Process mode only: SuperExec ServerApp sidecar resources
  superexecResources:
    requests:
      memory: "128Mi"
      cpu: "50m"
    limits:
      memory: "256Mi"
      cpu: "200m"
  service:
    type: ClusterIP
"""

RESOURCES_POOL = """
supernodes:
  image: flwr/supernode:1.25.0
  pools:
    - name: default
      replicas: 3
      supernodeResources:
        requests:
          memory: "512Mi"
          cpu: "200m"
        limits:
          memory: "1Gi"
          cpu: "1000m"
      # Process mode only: SuperExec ClientApp sidecar resources
      superexecResources:
        requests:
          memory: "256Mi"
          cpu: "100m"
        limits:
          memory: "512Mi"
          cpu: "500m"
"""

RESOURCES_MULTI_POOL = """
supernodes:
  image: flwr/supernode:1.25.0
  pools:
    - name: cpu-pool
      replicas: 3
      supernodeResources:
        requests:
          cpu: "500m"
          memory: "512Mi"
        limits:
          cpu: "2000m"
          memory: "1Gi"

    - name: memory-pool
      replicas: 2
      supernodeResources:
        requests:
          cpu: "200m"
          memory: "2Gi"
        limits:
          cpu: "1000m"
          memory: "4Gi"

    - name: gpu-pool
      replicas: 2
      supernodeResources:
        requests:
          cpu: "1000m"
          memory: "2Gi"
        limits:
          cpu: "4000m"
          memory: "8Gi"
      gpu:
        enabled: true
        vendor: nvidia
        resourceName: nvidia.com/gpu
        count: 1
"""

RESOURCES_WITH_GPU = """
pools:
  - name: nvidia-gpu-pool
    replicas: 2
    supernodeResources:
      requests:
        cpu: "1000m"
        memory: "2Gi"
      limits:
        cpu: "4000m"
        memory: "8Gi"
    gpu:
      enabled: true
      vendor: nvidia
      resourceName: nvidia.com/gpu
      count: 1
"""
