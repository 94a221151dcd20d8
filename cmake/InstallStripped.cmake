# Runs at install time, included by the install(CODE) of CMakeLists.txt, which sets:
#   PARLEY_INSTALL_SOURCE    the build tree's library (unstripped; it stays so)
#   PARLEY_INSTALL_LIBDIR    CMAKE_INSTALL_LIBDIR (relative to the prefix, or absolute)
#   PARLEY_INSTALL_OBJCOPY   CMAKE_OBJCOPY (empty when CMake found none)
# Installs the library into <libdir> stripped of its symbol table and debug sections, and
# those into <libdir>/.debug/<name>.debug; the stripped library names that file in a
# .gnu_debuglink section (its base name and a CRC of its contents), and gdb looks for it
# beside the library, in a .debug directory there, and under its global debug directory.
# The prefix is the one of this install run (`cmake --install --prefix` included), under
# $DESTDIR when set.

get_filename_component(_parley_name "${PARLEY_INSTALL_SOURCE}" NAME)
if(IS_ABSOLUTE "${PARLEY_INSTALL_LIBDIR}")
    set(_parley_dir "$ENV{DESTDIR}${PARLEY_INSTALL_LIBDIR}")
else()
    set(_parley_dir "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${PARLEY_INSTALL_LIBDIR}")
endif()
set(_parley_library "${_parley_dir}/${_parley_name}")
set(_parley_debug "${_parley_dir}/.debug/${_parley_name}.debug")

if(NOT EXISTS "${PARLEY_INSTALL_SOURCE}")
    message(FATAL_ERROR "${PARLEY_INSTALL_SOURCE} does not exist: build the project before installing it")
endif()

if(NOT PARLEY_INSTALL_OBJCOPY)
    message(WARNING "No objcopy found: installing libparley with its symbols and debug information")
    file(INSTALL "${PARLEY_INSTALL_SOURCE}" DESTINATION "${_parley_dir}"
         FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
    return()
endif()

message(STATUS "Installing: ${_parley_library} (stripped)")
message(STATUS "Installing: ${_parley_debug} (its debug information)")
file(MAKE_DIRECTORY "${_parley_dir}/.debug")
execute_process(COMMAND "${PARLEY_INSTALL_OBJCOPY}" --only-keep-debug "${PARLEY_INSTALL_SOURCE}" "${_parley_debug}"
                COMMAND_ERROR_IS_FATAL ANY)
file(CHMOD "${_parley_debug}" FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
# Written beside the target, then renamed over it: a program that has the old library
# mapped keeps its (unlinked) file instead of seeing it rewritten.
set(_parley_temporary "${_parley_dir}/.${_parley_name}.installing")
execute_process(COMMAND "${PARLEY_INSTALL_OBJCOPY}" --strip-unneeded "--add-gnu-debuglink=${_parley_debug}"
                        "${PARLEY_INSTALL_SOURCE}" "${_parley_temporary}"
                COMMAND_ERROR_IS_FATAL ANY)
file(CHMOD "${_parley_temporary}"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
file(RENAME "${_parley_temporary}" "${_parley_library}")
# Into install_manifest.txt, as file(INSTALL) would record them.
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_parley_library}" "${_parley_debug}")
