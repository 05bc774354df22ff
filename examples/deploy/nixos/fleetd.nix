# fleetd as a NixOS service: the options the runbook names
# (homelab.fleetd.controlPlanes on spore) and the same unit as
# examples/deploy/systemd/fleetd.service. README.md beside this file
# documents every option.
{ config, lib, ... }:

let
  cfg = config.homelab.fleetd;
  inherit (lib) mkEnableOption mkIf mkOption types;

  # A secret's path is a string, never a Nix path: a path literal would be
  # copied into the world-readable Nix store.
  secretPath = description: mkOption {
    type = types.str;
    example = "/run/secrets/fleetd/netbox-token";
    inherit description;
  };
  optionalSecretPath = description: mkOption {
    type = types.nullOr types.str;
    default = null;
    inherit description;
  };

  portOf = address: lib.toInt (lib.last (lib.splitString ":" address));

  # The credentials systemd copies into $CREDENTIALS_DIRECTORY, by name.
  credentials = {
    "netbox-token" = cfg.netbox.tokenFile;
    "tls.crt" = cfg.tls.certFile;
    "tls.key" = cfg.tls.keyFile;
    "secrets.yaml" = cfg.secretsBundleFile;
  }
  // lib.optionalAttrs (cfg.approverTokenFile != null) { "approver-token" = cfg.approverTokenFile; }
  // lib.optionalAttrs (cfg.tinkerbellKubeconfigFile != null) { "tinkerbell.kubeconfig" = cfg.tinkerbellKubeconfigFile; }
  // lib.optionalAttrs (cfg.clusterKubeconfigFile != null) { "cluster.kubeconfig" = cfg.clusterKubeconfigFile; };

  # fleetd's settings (fleetd -help). Secrets are files in
  # $CREDENTIALS_DIRECTORY: a relative NAME_FILE names one, and %d is the
  # directory for the settings that are paths already.
  environment = {
    FLEET_LISTEN = cfg.listen;
    FLEET_METRICS_LISTEN = cfg.metricsListen;
    FLEET_PUBLIC_URL = cfg.publicURL;
    FLEET_CONTROL_PLANES = lib.boolToString cfg.controlPlanes;
    FLEET_AUTO_PROVISION = lib.boolToString cfg.autoProvision;
    FLEET_NODES = cfg.nodesFile;
    TINKERBELL_NAMESPACE = cfg.namespace;
    NETBOX_URL = cfg.netbox.url;
    NETBOX_TOKEN_FILE = "netbox-token";
    FLEET_TLS_CERT = "%d/tls.crt";
    FLEET_TLS_KEY = "%d/tls.key";
    FLEET_SECRETS_BUNDLE = "%d/secrets.yaml";
  }
  // lib.optionalAttrs (cfg.topologyFile != null) { FLEET_TOPOLOGY = cfg.topologyFile; }
  // lib.optionalAttrs (cfg.netbox.switch != null) { NETBOX_SWITCH = cfg.netbox.switch; }
  // lib.optionalAttrs (cfg.netbox.bindingAuthor != null) { FLEET_BINDING_AUTHOR = cfg.netbox.bindingAuthor; }
  // lib.optionalAttrs (cfg.approverTokenFile != null) { FLEET_APPROVER_TOKEN_FILE = "approver-token"; }
  // lib.optionalAttrs (cfg.approverCAFile != null) { FLEET_APPROVER_CA = cfg.approverCAFile; }
  // lib.optionalAttrs (cfg.tinkerbellKubeconfigFile != null) { TINKERBELL_KUBECONFIG = "%d/tinkerbell.kubeconfig"; }
  // lib.optionalAttrs (cfg.clusterKubeconfigFile != null) { CLUSTER_KUBECONFIG = "%d/cluster.kubeconfig"; }
  // cfg.settings;

  # Settings that hold a secret, or name one, belong in the options above,
  # which pass them as credentials.
  secretSettings = [
    "NETBOX_TOKEN" "NETBOX_TOKEN_FILE" "FLEET_APPROVER_TOKEN" "FLEET_APPROVER_TOKEN_FILE"
    "FLEET_SEALING_KEY" "FLEET_SEALING_KEY_FILE" "FLEET_TLS_KEY" "FLEET_SECRETS_BUNDLE"
    "TINKERBELL_KUBECONFIG" "CLUSTER_KUBECONFIG"
  ];
in
{
  options.homelab.fleetd = {
    enable = mkEnableOption "fleetd, fleet's TPM-attested admission and provisioning server";

    package = mkOption {
      type = types.package;
      description = "The package whose bin/fleetd runs: fleet's examples/fleetd, built from the commit the host should run (the runbook: spore runs fleetd from main).";
    };

    controlPlanes = mkOption {
      type = types.bool;
      default = false;
      description = "FLEET_CONTROL_PLANES: whether control planes may be provisioned. Off, fleetd refuses a control plane before anything is wiped. The runbook's \"Provision a control plane\" needs it on.";
    };

    autoProvision = mkOption {
      type = types.bool;
      default = true;
      description = "FLEET_AUTO_PROVISION: a planned worker provisions at its first attestation. Off, every run waits for desired_action=provision; control planes always wait for it.";
    };

    listen = mkOption {
      type = types.str;
      default = ":8443";
      description = "FLEET_LISTEN: the HTTPS address of the attestation, config and approver APIs, which machines reach.";
    };

    metricsListen = mkOption {
      type = types.str;
      default = ":9464";
      description = "FLEET_METRICS_LISTEN: the plain HTTP address of /metrics, /readyz and /healthz; \"off\" disables it.";
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      description = "Open the port of listen in the firewall. The metrics port stays closed: open it for Prometheus alone.";
    };

    publicURL = mkOption {
      type = types.str;
      example = "https://spore.example:8443";
      description = "FLEET_PUBLIC_URL: the https URL nodes reach fleetd at; their Talos config URL is publicURL/config/<install code>.";
    };

    nodesFile = mkOption {
      type = types.str;
      example = "/srv/infra/clusters/folly/inventory/nodes.yaml";
      description = "FLEET_NODES: the nodes file, for its classes. Not a secret. Outside /home, which the service cannot read.";
    };

    topologyFile = mkOption {
      type = types.nullOr types.str;
      default = null;
      description = "FLEET_TOPOLOGY: the cluster topology; null: cluster-topology.json beside the nodes file, or in ../config/.";
    };

    namespace = mkOption {
      type = types.str;
      default = "tinkerbell";
      description = "TINKERBELL_NAMESPACE: the namespace of Workflows, Hardware and Rufio objects.";
    };

    netbox = {
      url = mkOption {
        type = types.str;
        example = "https://capsule.example";
        description = "NETBOX_URL: NetBox's URL.";
      };
      tokenFile = secretPath "The file that holds fleetd's NetBox API token (NETBOX_TOKEN_FILE), root's alone; passed as the credential netbox-token.";
      switch = mkOption {
        type = types.nullOr types.str;
        default = null;
        description = "NETBOX_SWITCH: the switch device the node ports belong to; null accepts any.";
      };
      bindingAuthor = mkOption {
        type = types.nullOr types.str;
        default = null;
        description = "FLEET_BINDING_AUTHOR (bindingAuthor): the NetBox user whose writes authorise an EK binding; null: every binding attests as ek-binding-unauthored.";
      };
    };

    tls = {
      certFile = secretPath "The PEM certificate chain of the HTTPS listener (FLEET_TLS_CERT); passed as the credential tls.crt.";
      keyFile = secretPath "The PEM private key of the certificate (FLEET_TLS_KEY); passed as the credential tls.key.";
    };

    secretsBundleFile = secretPath "The cluster's Talos secrets bundle, secrets.yaml (FLEET_SECRETS_BUNDLE); passed as the credential secrets.yaml.";

    approverTokenFile = optionalSecretPath "The file that holds the approvers' bearer token (FLEET_APPROVER_TOKEN_FILE, at least 16 characters); passed as the credential approver-token. null: no token is accepted.";

    approverCAFile = mkOption {
      type = types.nullOr types.str;
      default = null;
      description = "FLEET_APPROVER_CA: the PEM CA whose client certificates are approvers. Not a secret.";
    };

    tinkerbellKubeconfigFile = optionalSecretPath "The kubeconfig of the cluster that runs Tinkerbell and Rufio (TINKERBELL_KUBECONFIG), with its credentials embedded; passed as the credential tinkerbell.kubeconfig. Required on a host, which has no in-cluster configuration.";

    clusterKubeconfigFile = optionalSecretPath "The kubeconfig of the cluster nodes join, for bootstrap tokens (CLUSTER_KUBECONFIG), with its credentials embedded; passed as the credential cluster.kubeconfig. Required on a host.";

    settings = mkOption {
      type = types.attrsOf types.str;
      default = { };
      example = { FLEET_CONFIG_TTL = "2h"; FLEET_POLL_INTERVAL = "15s"; };
      description = "Any other fleetd setting (fleetd -help), by name. A setting that holds or names a secret is refused: use the options above.";
    };
  };

  config = mkIf cfg.enable {
    assertions = [
      {
        assertion = cfg.tinkerbellKubeconfigFile != null && cfg.clusterKubeconfigFile != null;
        message = "homelab.fleetd: tinkerbellKubeconfigFile and clusterKubeconfigFile are required on a host, which has no in-cluster Kubernetes configuration.";
      }
      {
        assertion = lib.all (name: !(cfg.settings ? ${name})) secretSettings;
        message = "homelab.fleetd.settings: ${lib.concatStringsSep ", " (lib.filter (name: cfg.settings ? ${name}) secretSettings)} hold or name a secret; set them with the options that pass them as credentials.";
      }
      {
        assertion = lib.all (path: !(lib.hasPrefix "/nix/store/" path)) (lib.attrValues credentials);
        message = "homelab.fleetd: a secret file is in the Nix store, which every user can read; keep it outside (e.g. /run/secrets, with sops-nix or agenix).";
      }
    ];

    networking.firewall.allowedTCPPorts = lib.optional cfg.openFirewall (portOf cfg.listen);

    systemd.services.fleetd = {
      description = "fleetd: TPM-attested admission and provisioning of fleet's nodes";
      documentation = [ "https://github.com/fleetkit/fleet/tree/main/examples/deploy" ];
      wantedBy = [ "multi-user.target" ];
      wants = [ "network-online.target" ];
      after = [ "network-online.target" ];
      inherit environment;
      serviceConfig = {
        Type = "exec";
        ExecStart = "${cfg.package}/bin/fleetd";
        Restart = "on-failure";
        RestartSec = "5s";
        # Exit code 2 is a bad setting, which a restart does not mend.
        RestartPreventExitStatus = 2;
        LimitNOFILE = 65536;
        LoadCredential = lib.mapAttrsToList (name: path: "${name}:${path}") credentials;

        # The hardening of examples/deploy/systemd/fleetd.service.
        DynamicUser = true;
        CapabilityBoundingSet = "";
        AmbientCapabilities = "";
        NoNewPrivileges = true;
        UMask = "0077";
        ProtectSystem = "strict";
        ProtectHome = true;
        PrivateTmp = true;
        PrivateDevices = true;
        DevicePolicy = "closed";
        PrivateUsers = true;
        PrivateMounts = true;
        ProtectProc = "invisible";
        ProtectHostname = true;
        ProtectClock = true;
        ProtectKernelTunables = true;
        ProtectKernelModules = true;
        ProtectKernelLogs = true;
        ProtectControlGroups = true;
        RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" ];
        RestrictNamespaces = true;
        RestrictRealtime = true;
        RestrictSUIDSGID = true;
        LockPersonality = true;
        MemoryDenyWriteExecute = true;
        RemoveIPC = true;
        KeyringMode = "private";
        SystemCallArchitectures = "native";
        SystemCallFilter = [ "@system-service" "~@privileged @resources" ];
        SystemCallErrorNumber = "EPERM";
      };
    };
  };
}
