from django.urls import include, path
from rest_framework.authtoken.views import obtain_auth_token
from rest_framework.routers import DefaultRouter

from annotations import agreement_views
from annotations.api import assignment_views, crowd_views, quality_views, views

router = DefaultRouter()
router.register("studies", views.StudyViewSet, basename="study")
router.register("items", views.ItemViewSet, basename="item")
router.register("annotations", views.AnnotationViewSet, basename="annotation")
router.register("annotators", views.AnnotatorViewSet, basename="annotator")
router.register("exports", views.ExportJobViewSet, basename="export")
router.register("assignments", assignment_views.MyAssignmentViewSet, basename="assignment")

urlpatterns = [
    path("studies/<int:pk>/agreement/", agreement_views.AgreementReportView.as_view(), name="api-agreement"),
    path("studies/<int:pk>/consensus/", agreement_views.ConsensusView.as_view(), name="api-consensus"),
    path("studies/<int:pk>/adjudication/", agreement_views.AdjudicationView.as_view(), name="api-adjudication"),
    path("studies/<int:pk>/share/", views.StudyShareView.as_view(), name="api-study-share"),
    path("studies/<int:pk>/enrollments/", views.StudyEnrollmentView.as_view(), name="api-study-enrollments"),
    path("studies/<int:pk>/items/import/", views.ItemImportView.as_view(), name="api-item-import"),
    path("studies/<int:pk>/annotations/import/", views.AnnotationImportView.as_view(), name="api-annotation-import"),
    path("studies/<int:pk>/export/<str:fmt>/", views.StudyExportView.as_view(), name="api-study-export"),
    path("exports/<int:pk>/download/", views.ExportDownloadView.as_view(), name="api-export-download"),
    path("presets/", views.PresetListView.as_view(), name="api-presets"),
    path("presets/<str:key>/", views.PresetDetailView.as_view(), name="api-preset"),
    path("protocols/validate/", views.ProtocolValidateView.as_view(), name="api-protocol-validate"),
    path("me/", views.MeView.as_view(), name="api-me"),
    path("auth/token/", obtain_auth_token, name="api-token"),
    path("studies/<int:pk>/metrics/", views.StudyMetricsView.as_view(), name="api-study-metrics"),
    path("compare/", views.CompareView.as_view(), name="api-compare"),
    path("studies/<int:pk>/assignments/next/", assignment_views.ClaimNextView.as_view(), name="api-claim-next"),
    path("assignments/<int:pk>/submit/", assignment_views.SubmitView.as_view(), name="api-assignment-submit"),
    path("assignments/<int:pk>/skip/", assignment_views.SkipView.as_view(), name="api-assignment-skip"),
    path("assignments/<int:pk>/release/", assignment_views.ReleaseView.as_view(), name="api-assignment-release"),
    path("studies/<int:pk>/invitations/", crowd_views.StudyInvitationsView.as_view(), name="api-study-invitations"),
    path("studies/<int:pk>/invitations/<int:invitation_id>/revoke/", crowd_views.InvitationRevokeView.as_view(),
         name="api-invitation-revoke"),
    path("studies/<int:pk>/payments/", crowd_views.StudyPaymentsView.as_view(), name="api-study-payments"),
    path("studies/<int:pk>/quality/", quality_views.QualityReportView.as_view(), name="api-quality"),
    path("studies/<int:pk>/quality/settings/", quality_views.QualitySettingsView.as_view(),
         name="api-quality-settings"),
    path("studies/<int:pk>/controls/import/", quality_views.ControlImportView.as_view(), name="api-control-import"),
    path("studies/<int:pk>/exclusions/", quality_views.ExclusionListView.as_view(), name="api-exclusions"),
    path("studies/<int:pk>/exclusions/<int:annotator_id>/reinstate/", quality_views.ExclusionReinstateView.as_view(),
         name="api-exclusion-reinstate"),
    path("items/<int:pk>/control/", quality_views.ItemControlView.as_view(), name="api-item-control"),
    path("", include(router.urls)),
]
