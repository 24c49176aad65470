# Copyright 2026 The external-storage Authors.
# SPDX-License-Identifier: Apache-2.0
"""A Cinder volume driver for the cinder provisioner's integration tests.

It stores nothing, but answers os-initialize_connection the way real
backends do, chosen by the volume type's name:

  iscsi          LVM-style iSCSI target with per-volume CHAP credentials
                 (kept in provider_auth, as the LVM driver keeps them)
  rbd            Ceph RBD: pool/image, monitors, cephx user
  fibre_channel  FC target WWNs and LUN
  nvme           driver_volume_type nvmeof, which has no Kubernetes source
  broken         create_volume fails, so the volume goes to status error

Set KUBEPROV_TGT_PORTAL, KUBEPROV_TGT_CONTROL_PORT and KUBEPROV_TGT_DIR to
export iscsi volumes as real file-backed LUNs on a running tgtd (its
portal, its management port, a directory for the backing files), with
per-volume CHAP and an ACL for the connector's initiator, so that a test
can log in with what the PV says.
"""

import os
import secrets
import subprocess

from cinder import exception
from cinder.volume import driver

IQN_PREFIX = "iqn.2010-10.org.openstack:volume-"


class KubeprovTestDriver(driver.VolumeDriver):
    VERSION = "1.0"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tgt_portal = os.environ.get("KUBEPROV_TGT_PORTAL", "")
        self.tgt_control = os.environ.get("KUBEPROV_TGT_CONTROL_PORT", "0")
        self.tgt_dir = os.environ.get("KUBEPROV_TGT_DIR", "/tmp")

    def do_setup(self, context):
        pass

    def check_for_setup_error(self):
        pass

    def _update_volume_stats(self):
        name = self.configuration.safe_get("volume_backend_name") or "kubeprov"
        self._stats = {
            "volume_backend_name": name,
            "vendor_name": "kubeprov",
            "driver_version": self.VERSION,
            "storage_protocol": "iSCSI",
            "pools": [{
                "pool_name": name,
                "total_capacity_gb": 1000,
                "free_capacity_gb": 1000,
                "reserved_percentage": 0,
                "QoS_support": False,
            }],
        }

    @staticmethod
    def _kind(volume):
        vt = volume.volume_type
        return vt.name if vt else ""

    def create_volume(self, volume):
        if self._kind(volume) == "broken":
            raise exception.VolumeBackendAPIException(
                data="the test backend refuses volume type broken")
        return None

    def delete_volume(self, volume):
        pass

    def ensure_export(self, context, volume):
        pass

    def create_export(self, context, volume, connector):
        if self._kind(volume) != "iscsi" or volume.provider_auth:
            return None
        # Per-volume CHAP credentials, as the LVM driver makes them.
        auth = "CHAP %s %s" % ("kp" + secrets.token_hex(6), secrets.token_urlsafe(12))
        return {"provider_auth": auth}

    def remove_export(self, context, volume):
        pass

    def _tgt(self, *args, check=True):
        subprocess.run(["tgtadm", "-C", self.tgt_control, "--lld", "iscsi",
                        *args], check=check, capture_output=True)

    def _tid(self, volume):
        # tgtd numbers targets; derive a stable one from the volume id.
        return str(int(volume.id.replace("-", "")[:6], 16) % 30000 + 1)

    def _export_tgt(self, volume, iqn, user, password, initiator):
        tid = self._tid(volume)
        backing = os.path.join(self.tgt_dir, "volume-%s.img" % volume.id)
        # A retried initialize finds the target of the first one.
        self._tgt("--op", "delete", "--force", "--mode", "target", "--tid",
                  tid, check=False)
        self._tgt("--op", "delete", "--mode", "account", "--user", user,
                  check=False)
        with open(backing, "wb") as f:
            f.truncate(volume.size * 1024 * 1024)  # MiB per GiB: a test LUN
        self._tgt("--op", "new", "--mode", "target", "--tid", tid, "-T", iqn)
        self._tgt("--op", "new", "--mode", "logicalunit", "--tid", tid,
                  "--lun", "1", "-b", backing)
        self._tgt("--op", "new", "--mode", "account", "--user", user,
                  "--password", password)
        self._tgt("--op", "bind", "--mode", "account", "--tid", tid,
                  "--user", user)
        self._tgt("--op", "bind", "--mode", "target", "--tid", tid,
                  "--initiator-name", initiator)

    def initialize_connection(self, volume, connector, **kwargs):
        kind = self._kind(volume)
        if kind == "iscsi":
            _, user, password = volume.provider_auth.split(" ", 2)
            iqn = IQN_PREFIX + volume.id
            portal = self.tgt_portal or "127.0.0.1:3260"
            if self.tgt_portal:
                self._export_tgt(volume, iqn, user, password,
                                 connector["initiator"])
            return {"driver_volume_type": "iscsi", "data": {
                "target_discovered": False,
                "target_portal": portal,
                "target_iqn": iqn,
                "target_lun": 1,
                "volume_id": volume.id,
                "auth_method": "CHAP",
                "auth_username": user,
                "auth_password": password,
                "encrypted": False,
                "access_mode": "rw",
            }}
        if kind == "rbd":
            return {"driver_volume_type": "rbd", "data": {
                "name": "volumes/volume-%s" % volume.id,
                "hosts": ["192.0.2.10", "192.0.2.11", "2001:db8::12"],
                "ports": ["6789", "6789", "3300"],
                "cluster_name": "ceph",
                "auth_enabled": True,
                "auth_username": "cinder",
                "secret_type": "ceph",
                "secret_uuid": "457eb676-33da-42ec-9a8c-9293d545c337",
                "volume_id": volume.id,
                "discard": True,
                "access_mode": "rw",
            }}
        if kind == "fibre_channel":
            return {"driver_volume_type": "fibre_channel", "data": {
                "target_discovered": False,
                "target_lun": 1,
                "target_wwn": ["500A0981891B8DC5", "500a0981991b8dc5"],
                "initiator_target_map": {},
                "volume_id": volume.id,
                "access_mode": "rw",
            }}
        if kind == "nvme":
            return {"driver_volume_type": "nvmeof", "data": {
                "target_nqn": "nqn.2014-08.org.nvmexpress:uuid:" + volume.id,
                "portals": [["127.0.0.1", 4420, "tcp"]],
            }}
        raise exception.VolumeBackendAPIException(
            data="no connection for volume type %r" % kind)

    def terminate_connection(self, volume, connector, **kwargs):
        if self._kind(volume) == "iscsi" and self.tgt_portal:
            tid = self._tid(volume)
            user = volume.provider_auth.split(" ", 2)[1]
            # Deleting the target drops its LUN, ACL and account binding.
            self._tgt("--op", "delete", "--force", "--mode", "target",
                      "--tid", tid, check=False)
            self._tgt("--op", "delete", "--mode", "account", "--user", user,
                      check=False)
            backing = os.path.join(self.tgt_dir, "volume-%s.img" % volume.id)
            if os.path.exists(backing):
                os.remove(backing)
