"""The full `Federation` CRs of the flower-operator README
(shared/seeds/flower-operator-readme.md), verbatim, comments included: each is a SPEC
for what flower-federation renders (tests/support/operator_examples.py)."""

QUICK_START = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: my-federation
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2
"""

DAEMONSET = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-daemonset
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    resources:
      requests:
        memory: "256Mi"
        cpu: "100m"
      limits:
        memory: "512Mi"
        cpu: "500m"
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        images: {}
        supernodeResources:
          requests:
            memory: "512Mi"
            cpu: "200m"
          limits:
            memory: "1Gi"
            cpu: "1000m"
        # Target specific nodes:
        # podTemplate:
        #   spec:
        #     nodeSelector:
        #       flower.dev/role: client
"""

STATEFULSET = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-statefulset
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    resources:
      requests:
        memory: "256Mi"
        cpu: "100m"
      limits:
        memory: "512Mi"
        cpu: "500m"
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2  # Required in StatefulSet mode
        images: {}
        supernodeResources:
          requests:
            memory: "512Mi"
            cpu: "200m"
          limits:
            memory: "1Gi"
            cpu: "1000m"
"""

PROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-process
spec:
  mode: StatefulSet
  isolationMode: process

  superlink:
    image: flwr/superlink:1.25.0
    superexecImage: flwr/superexec:1.25.0  # Required
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2
        images:
          superexecClientApp: flwr/superexec:1.25.0  # Required
"""

SUBPROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-subprocess
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: my-registry/superlink-with-deps:1.25.0  # Includes ServerApp deps
    service:
      type: ClusterIP

  supernodes:
    image: my-registry/supernode-with-deps:1.25.0  # Includes ClientApp deps
    pools:
      - name: default
        replicas: 2
        images: {}  # No superexecClientApp
"""

MULTIPOOLS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-multipools
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: pool-a
        images: {}
        # podTemplate:
        #   spec:
        #     nodeSelector:
        #       flower.ai/pool: a

      - name: pool-b
        images:
          supernode: flwr/supernode:1.24.0  # Override with different version
        # podTemplate:
        #   spec:
        #     nodeSelector:
        #       flower.ai/pool: b
"""

EXAMPLES_DAEMONSET_PROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-daemonset-process
spec:
  mode: DaemonSet
  isolationMode: process

  superlink:
    image: flwr/superlink:1.25.0
    superexecImage: flwr/superexec:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        images:
          superexecClientApp: flwr/superexec:1.25.0
"""

EXAMPLES_STATEFULSET_SUBPROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-statefulset-subprocess
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2
        images: {}
"""

EXAMPLES_NODECONFIG = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-nodeconfig
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 4
        images: {}
        nodeConfig:
          partition-id: "{index}"
          num-partitions: "{replicas}"
          name: "client_{pool}_{index}"
"""

EXAMPLES_NODECONFIG_DAEMONSET = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-nodeconfig-daemonset
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: edge
        images: {}
        nodeConfig:
          name: "client_{node}"
          node-id: "{node}"
          pool: "{pool}"
"""

PARTITIONED_TRAINING = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: partitioned-training
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: my-app/client:latest
    pools:
      - name: default
        replicas: 4
        images: {}
        nodeConfig:
          # Each replica gets a unique partition (0, 1, 2, 3)
          partition-id: "{index}"
          # Total partitions matches replica count (4)
          num-partitions: "{replicas}"
          # Unique client name
          name: "client_{pool}_{index}"
"""

EDGE_FEDERATION = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: edge-federation
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: my-app/client:latest
    pools:
      - name: edge
        images: {}
        nodeConfig:
          # Use Kubernetes node name for unique identification
          name: "client_{node}"
          node-id: "{node}"
          pool: "{pool}"
"""
