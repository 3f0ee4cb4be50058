# OpenMM front end (wrappers/nnpops/openmm.py, openmmml.py): one CTest entry per test function.
# Skipped (exit 77) where OpenMM >= 8.6 or, for the openmm-ml cases, openmm-ml is missing.
set(_nnpops_openmm_cases
  "force:test_whole_molecule_matches_library"
  "force:test_matches_ase_calculator"
  "force:test_periodic_matches_library"
  "force:test_subset_ml_atoms"
  "force:test_public_state_api_fallback"
  "force:test_topology_as_atomic_numbers"
  "force:test_charge"
  "force:test_computation_keeps_context_and_buffers"
  "force:test_runs_on_openmm_worker_thread"
  "force:test_forces_dtype_float32"
  "force:test_platform_forces_dtype"
  "force:test_pickle_keeps_only_the_spec"
  "force:test_xml_serializer_round_trip"
  "force:test_deepcopy_and_clone"
  "force:test_two_contexts_on_one_system"
  "force:test_errors_are_raised_early"
  "force:test_wrong_particle_count_is_an_openmm_error"
  "force:test_library_error_becomes_openmm_exception"
  "force:test_import_does_not_load_library"
  "md:test_water_box_langevin"
  "md:test_water_box_energy_conservation"
  "mlmm:test_mixed_system_runs_and_matches_library"
  "mlmm:test_bond_force_keeps_molecule_whole_under_barostat"
  "mlmm:test_explicit_bonds_and_find_bonds"
  "openmmml:test_entry_points_declared"
  "openmmml:test_create_system"
  "openmmml:test_create_mixed_system"
  "openmmml:test_create_mixed_system_interpolating"
  "openmmml:test_bond_force_from_topology"
  "openmmml:test_unknown_name"
  "tensornet:test_force_matches_reference"
  "tensornet:test_charge"
  "tensornet:test_ensemble"
  "tensornet:test_openmmml_model_file")
foreach(_case ${_nnpops_openmm_cases})
  string(REPLACE ":" ";" _parts "${_case}")
  list(GET _parts 0 _file)
  list(GET _parts 1 _func)
  string(REGEX REPLACE "^test_" "" _name "${_func}")
  nnpops_py_test(${_file}.${_name} openmm tests/openmm/test_${_file}.py::${_func})
endforeach()
# The TensorNet cases need the converted TensorNet models.
foreach(_c force_matches_reference charge ensemble openmmml_model_file)
  set_tests_properties(openmm.tensornet.${_c} PROPERTIES FIXTURES_REQUIRED "models;tensornet_models")
endforeach()
